//! Look-alikes derived from the statements themselves (guide, "Security": a function or operator
//! another role creates in `public` can never be picked over PostgreSQL's own): whatever another
//! role creates in `public`, where the extension lives, nothing it made runs inside pg_jobqueue,
//! and no statement or stored expression of the extension refers to it.
//!
//! `security.rs` plants a hand-picked list of look-alikes; a statement that list did not foresee
//! slips through. This test derives its list instead, so it cannot miss a statement:
//!
//! * Round 1 (discovery) runs everything the extension does on a server that logs the parse tree
//!   of every statement it parses (`debug_print_rewritten`): the SPI statements of the `jq_*`
//!   functions, of DROP EXTENSION's event trigger and of the background worker's reap, expiry, tick
//!   and prune passes, the statements of its SQL and PL/pgSQL functions, and those of every install
//!   and upgrade script. It also runs a user's own queries (`users_queries`), whose look-alikes
//!   round 2 may not run either. A tree is the extension's when its error context names the statement (SPI,
//!   a SQL function) or when it was parsed by `CREATE` or `ALTER EXTENSION pg_jobqueue`; this
//!   test's own statements have neither. PostgreSQL 15 leaves the query id out of the tree, so the
//!   statement's text comes from that context, not from pg_stat_statements. The test also reads
//!   every expression stored for the extension's objects (defaults, constraints, index
//!   expressions and predicates, views, trigger conditions), after each DDL command through an
//!   event trigger, and at the end. Every call in those trees (operators, functions, aggregates,
//!   window functions) is typed at its call site, implicit casts taken off. A call that is not an
//!   exact match of a function or operator of pg_catalog (or of the extension itself) could be
//!   captured by a look-alike of those exact types: one is derived for each such call. A constant
//!   may have been an untyped literal in the source, which a look-alike taking `text` captures, so
//!   each constant argument also gets one taking `text`.
//! * Round 2 (attack) starts another server on which `mallory`, a role with no right but CREATE on
//!   `public`, plants every derived look-alike, and runs everything of round 1 again as a
//!   superuser, a consumer and a pg_monitor member, with the background worker's passes. Each
//!   look-alike logs that it ran (a log line outlives a rollback), tries to make `mallory` a
//!   superuser, and returns what the original would. None may run, `mallory` stays as it was, and
//!   no logged statement or stored expression may call anything `mallory` owns, whether or not it
//!   ran. So that a look-alike that is never picked cannot pass for a safe statement, each must be
//!   picked by an unqualified call of its exact types (`dead_look_alikes`).
//!
//! Every file of `sql/queries` must be among the statements round 1 parsed, and every function of
//! the extension must have been called: a new statement or function without coverage fails here.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use jq_harness::client::connect_as;
use jq_harness::{Client, Cluster};
use postgres::Row;

/// The attacker of round 2: no right but CREATE on `public`.
const ATTACKER: &str = "mallory";
/// The attacker of the frozen installs' probe (`frozen_installs_with_look_alikes_planted_first`).
const PROBE_ATTACKER: &str = "eve";

const BOOL: u32 = 16;
const TEXT: u32 = 25;
const UNKNOWN: u32 = 705;
const RECORD: u32 = 2249;
const ANY: u32 = 2276;
const VOID: u32 = 2278;

/// The server settings of both rounds: the library preloaded, so that the background worker serves
/// `databases` (its passes every 250 ms, a prune pass every second, and the ticks in each reap
/// pass); every call of a function counted (`every_function_was_called`); and the parse tree of
/// every statement logged, with the database of each log line.
fn settings(databases: &[String]) -> Vec<String> {
    vec![
        "shared_preload_libraries = 'pg_jobqueue'".into(),
        format!("pg_jobqueue.reaper_databases = '{}'", databases.join(", ")),
        "pg_jobqueue.reaper_interval = 250".into(),
        "pg_jobqueue.prune_interval = 1".into(),
        "track_functions = 'all'".into(),
        "debug_print_rewritten = on".into(),
        "debug_pretty_print = off".into(),
        "log_line_prefix = '[%p] {%d} <%b> '".into(),
    ]
}

#[test]
fn no_statement_of_the_extension_can_be_captured_by_a_look_alike() {
    let mut sources = Sources::read();
    let plants = discover(&mut sources);
    attack(&sources, &plants);
}

// ---------------------------------------------------------------------------------------------
// The two rounds
// ---------------------------------------------------------------------------------------------

/// Round 1: runs everything, reads every tree, and derives the look-alikes.
fn discover(sources: &mut Sources) -> Vec<Plant> {
    let databases = sources.databases();
    let cluster = start(&databases, &[], &[]);
    let sharedir: String = cluster
        .connect()
        .query_one("SELECT setting FROM pg_catalog.pg_config WHERE name = 'SHAREDIR'", &[])
        .unwrap()
        .get(0);
    sources.extension_dir = Path::new(&sharedir).join("extension");
    let mut catalogs = Catalogs::default();
    let mut errors = Vec::new();
    let called_at_drop = run_everything(&cluster, sources, &mut None, &mut catalogs, &mut errors);
    assert!(errors.is_empty(), "round 1 must run cleanly, before any look-alike exists:\n{}", errors.join("\n"));
    every_function_was_called(&cluster, "fresh", &called_at_drop);

    let log = cluster.log();
    let (mut trees, statements) = logged_trees(&log);
    let logged = trees.len();
    trees.extend(stored_trees(&cluster, &databases));
    for db in &databases {
        catalogs.load(&cluster, db);
    }
    let analysis = analyse(&trees, &catalogs);
    assert!(
        analysis.problems.is_empty(),
        "calls this test cannot type, so cannot derive look-alikes for:\n{}",
        analysis.problems.join("\n")
    );

    let uncovered = sources.uncovered(&statements);
    println!("look-alike discovery (round 1):");
    println!("  trees parsed: {logged} distinct statements logged, {} stored expressions", trees.len() - logged);
    println!("  call nodes: {}", analysis.call_nodes);
    println!("  distinct calls: {}", analysis.distinct.len());
    println!("  calls exact in pg_catalog or the extension: {}", analysis.exact.len());
    println!("  look-alikes derived: {}", analysis.plants.len());
    for plant in analysis.plants.values() {
        println!("    {}", plant.label());
    }
    if !analysis.unplantable.is_empty() {
        println!("  look-alikes not derived (a pseudo-type at the call site): {:?}", analysis.unplantable);
    }
    println!("  sql/queries files covered: {} of {}", sources.queries.len() - uncovered.len(), sources.queries.len());
    assert!(
        uncovered.is_empty(),
        "files of sql/queries that no statement parsed in round 1 contains (add a call that runs them):\n{}",
        uncovered.join("\n")
    );
    analysis.plants.into_values().collect()
}

/// Round 2: plants every look-alike as `mallory`, runs everything again, and asserts that nothing
/// of `mallory`'s ran or is referred to.
fn attack(sources: &Sources, plants: &[Plant]) {
    let databases = sources.databases();
    let probes: Vec<String> = sources.frozen.iter().map(|v| format!("probe_{}", v.replace('.', "_"))).collect();
    let cluster = start(&databases, &probes, &[(ATTACKER, &databases[..]), (PROBE_ATTACKER, &probes[..])]);
    let mut catalogs = Catalogs::default();
    let mut errors = Vec::new();
    let mut planter = Some(Planter::new(ATTACKER, plants));
    run_everything(&cluster, sources, &mut planter, &mut catalogs, &mut errors);
    let planter = planter.unwrap();
    frozen_installs_with_look_alikes_planted_first(&cluster, sources, plants, &probes);

    make_canaries(&cluster, plants, &planter);

    let log = cluster.log();
    let (trees, _) = logged_trees(&log);
    let (canaries, mut trees): (Vec<Tree>, Vec<Tree>) = trees
        .into_iter()
        .partition(|t| matches!(&t.origin, Origin::SqlFunction { name } if name.starts_with("lookalike_canary_")));
    trees.extend(stored_trees(&cluster, &databases));
    for db in &databases {
        catalogs.load(&cluster, db);
    }
    let dead = dead_look_alikes(&canaries, &catalogs, plants, &planter);
    assert!(
        dead.is_empty(),
        "look-alikes an unqualified call of their exact types does not pick, though pg_catalog has none of \
         those types (so they could not show a hole):\n{}",
        dead.join("\n")
    );
    let captured = captured_calls(&trees, &catalogs, sources, ATTACKER);
    let ran = look_alikes_that_ran(&log, ATTACKER);
    let superuser: bool = cluster
        .connect()
        .query_one("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = $1", &[&ATTACKER])
        .unwrap()
        .get(0);

    let planted = planter.planted_anywhere();
    println!("look-alike attack (round 2):");
    println!("  look-alikes planted: {} of {}", planted.len(), plants.len());
    println!(
        "  look-alikes an unqualified call of their types picks: {} (the others have a twin in pg_catalog)",
        live_look_alikes(&canaries, &catalogs).len()
    );
    let never: Vec<String> = (0..plants.len())
        .filter(|i| !planted.contains(i))
        .map(|i| format!("{}: {}", plants[i].label(), planter.failures.get(&i).map_or("", String::as_str)))
        .collect();
    if !never.is_empty() {
        println!("  look-alikes that could not be planted in any database:\n    {}", never.join("\n    "));
    }

    let mut failures = String::new();
    if !captured.is_empty() {
        let _ = writeln!(
            failures,
            "{} call(s) of the extension resolve to a look-alike of {ATTACKER} (qualify the operator as \
             OPERATOR(pg_catalog.op) or the function as pg_catalog.f, or make the argument types exact):",
            captured.len()
        );
        for line in &captured {
            let _ = writeln!(failures, "  {line}");
        }
    }
    if !ran.is_empty() {
        let _ = writeln!(failures, "{} look-alike run(s) inside pg_jobqueue:", ran.len());
        for line in &ran {
            let _ = writeln!(failures, "  {line}");
        }
    }
    if superuser {
        let _ = writeln!(failures, "{ATTACKER} became a superuser");
    }
    if !errors.is_empty() {
        let _ = writeln!(failures, "{} call(s) that failed with the look-alikes planted:", errors.len());
        for line in &errors {
            let _ = writeln!(failures, "  {line}");
        }
    }
    assert!(failures.is_empty(), "{failures}");
}

/// Starts a server and makes the roles, the databases (each with the event trigger that keeps the
/// stored expressions of every DDL command, `TOOL`), and gives each attacker CREATE on `public` in
/// its databases. Restarts it so that the background worker serves the new databases.
fn start(databases: &[String], probes: &[String], attackers: &[(&str, &[String])]) -> Cluster {
    let settings = settings(databases);
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let cluster = Cluster::start_without_extension(&settings);
    let mut admin = cluster.connect();
    admin
        .batch_execute(&format!(
            "CREATE ROLE consumer LOGIN; CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
             CREATE ROLE {ATTACKER} LOGIN; CREATE ROLE {PROBE_ATTACKER} LOGIN; CREATE ROLE canary LOGIN;"
        ))
        .unwrap();
    for db in databases.iter().chain(probes) {
        admin.batch_execute(&format!("CREATE DATABASE {db}")).unwrap();
        connect_as(&cluster, db, "postgres").batch_execute(TOOL).unwrap();
    }
    for (attacker, dbs) in attackers {
        for db in dbs.iter() {
            // PostgreSQL 15 no longer lets everyone create in public; older clusters, and databases
            // whose owner allows it, still do.
            connect_as(&cluster, db, "postgres")
                .batch_execute(&format!("GRANT CREATE ON SCHEMA public TO {attacker}"))
                .unwrap();
        }
    }
    // The launcher looks for a database that did not exist at start only once a minute.
    cluster.restart_after(Duration::ZERO);
    cluster
}

/// Everything the extension does, in every database: a fresh install of the current version,
/// every function, the background worker's passes; then each released version installed with jobs
/// in it and upgraded step by step to the current one, a new job depending on jobs from before, and
/// every function again. In round 2 the planter plants before each install and upgrade, and again
/// after it, when the extension's types exist. Catalogs are read at each step, so that objects an
/// upgrade drops are still known.
fn run_everything(
    cluster: &Cluster,
    sources: &Sources,
    planter: &mut Option<Planter>,
    catalogs: &mut Catalogs,
    errors: &mut Vec<String>,
) -> BTreeSet<String> {
    let mut plant = |db: &str| {
        if let Some(planter) = planter.as_mut() {
            planter.plant(cluster, db);
        }
    };
    plant("fresh");
    let mut admin = Caller::new(cluster, "fresh", "postgres");
    if admin.ok(errors, "CREATE EXTENSION pg_jobqueue") {
        plant("fresh");
        exercise(cluster, "fresh", errors);
        worker_passes(cluster, "fresh", errors);
        claims_maintain(cluster, "fresh", errors);
    }
    // DROP EXTENSION runs statements of the extension too (its event trigger).
    plant("dropped");
    let mut called_at_drop = BTreeSet::new();
    let mut admin = Caller::new(cluster, "dropped", "postgres");
    if admin.ok(errors, "CREATE EXTENSION pg_jobqueue") {
        plant("dropped");
        admin.rows(errors, "SELECT jq_grant('consumer', 'mail', 'consume')");
        catalogs.load(cluster, "dropped");
        called_at_drop = drop_extension(cluster, "dropped", errors);
    }
    for version in &sources.frozen {
        let db = database_of(version);
        let mut admin = Caller::new(cluster, &db, "postgres");
        // Look-alikes are planted only once the released version is installed: a released install
        // script is frozen (DEVELOPMENT.md, "Releasing"), and those of 0.1.0 and 0.2.0 give columns
        // the default `nextval('...')` with an untyped literal, which a `nextval(text)` planted
        // first captures. So the database stands for one installed before anyone could plant;
        // `frozen_installs_with_look_alikes_planted_first` prints what planting first does to each
        // released script, and what the upgrades leave of it.
        if !admin.ok(errors, &format!("CREATE EXTENSION pg_jobqueue VERSION '{version}'")) {
            continue;
        }
        catalogs.load(cluster, &db);
        jobs_of_a_released_version(&mut admin, version, errors);
        let mut updated = true;
        for next in sources.versions_after(version) {
            plant(&db);
            updated = admin.ok(errors, &format!("ALTER EXTENSION pg_jobqueue UPDATE TO '{next}'"));
            catalogs.load(cluster, &db);
            if !updated {
                break;
            }
        }
        if updated {
            plant(&db);
            depend_on_jobs_from_before(cluster, &db, errors);
            exercise(cluster, &db, errors);
        }
    }
    called_at_drop
}

/// Drops the extension, and says which of its functions that called (read in the dropping
/// transaction, since a dropped function's figures go with it).
fn drop_extension(cluster: &Cluster, db: &str, errors: &mut Vec<String>) -> BTreeSet<String> {
    let mut client = inspector(cluster, db);
    let functions = client
        .query(
            "SELECT array_agg(p.oid), array_agg(p.oid::regprocedure::text)
             FROM pg_proc p
             JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_jobqueue'",
            &[],
        )
        .unwrap();
    let (oids, names): (Vec<u32>, Vec<String>) = (functions[0].get(0), functions[0].get(1));
    let mut dropping = client.transaction().unwrap();
    // CASCADE: in round 2 the look-alikes of the extension's types depend on it.
    if let Err(e) = dropping.batch_execute("DROP EXTENSION pg_jobqueue CASCADE") {
        errors.push(format!("postgres in {db}: DROP EXTENSION pg_jobqueue CASCADE: {}", message_of(&e)));
        return BTreeSet::new();
    }
    let called = dropping
        .query(
            "SELECT f.name FROM unnest($1::oid[], $2::text[]) AS f (oid, name)
             WHERE pg_stat_get_xact_function_calls(f.oid) > 0",
            &[&oids, &names],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    dropping.commit().unwrap();
    called
}

/// With look-alikes planted before `CREATE EXTENSION pg_jobqueue VERSION` of each released version
/// (by another attacker, in databases of their own), which calls of the frozen install script
/// resolve to them, and which of those the upgrades to the current version leave stored. Printed,
/// not asserted: a released script is never edited, so a hole in it can only be closed by the
/// upgrade that follows it.
fn frozen_installs_with_look_alikes_planted_first(
    cluster: &Cluster,
    sources: &Sources,
    plants: &[Plant],
    probes: &[String],
) {
    let mut planter = Planter::new(PROBE_ATTACKER, plants);
    let mut catalogs = Catalogs::default();
    for (version, db) in sources.frozen.iter().zip(probes) {
        planter.plant(cluster, db);
        let mut admin = connect_as(cluster, db, "postgres");
        let mut failed = admin.batch_execute(&format!("CREATE EXTENSION pg_jobqueue VERSION '{version}'")).err();
        catalogs.load(cluster, db);
        let mut trees: Vec<Tree> = logged_trees(&cluster.log()).0.into_iter().filter(|t| t.db == *db).collect();
        trees.extend(stored_trees(cluster, std::slice::from_ref(db)));
        let captured = captured_calls(&trees, &catalogs, sources, PROBE_ATTACKER);
        for next in sources.versions_after(version) {
            if failed.is_none() {
                failed = admin.batch_execute(&format!("ALTER EXTENSION pg_jobqueue UPDATE TO '{next}'")).err();
                catalogs.load(cluster, db);
            }
        }
        let kept =
            captured_calls(&stored(cluster, std::slice::from_ref(db), false), &catalogs, sources, PROBE_ATTACKER);
        println!("frozen install of {version} with look-alikes planted before it:");
        if let Some(e) = failed {
            println!("  failed: {}", message_of(&e));
        }
        if captured.is_empty() {
            println!("  nothing captured");
        }
        for line in captured {
            println!("  captured: {line}");
        }
        for line in kept {
            println!("  still stored after the upgrades to {}: {line}", sources.versions.last().unwrap());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// What is run
// ---------------------------------------------------------------------------------------------

/// One connection of one role, for calls whose failure is recorded rather than fatal: in round 2 a
/// captured call may fail, and the test goes on to find every other one.
struct Caller {
    client: Client,
    label: String,
}

impl Caller {
    fn new(cluster: &Cluster, db: &str, role: &str) -> Caller {
        Caller { client: connect_as(cluster, db, role), label: format!("{role} in {db}") }
    }

    fn rows(&mut self, errors: &mut Vec<String>, sql: &str) -> Vec<Row> {
        self.client.query(sql, &[]).unwrap_or_else(|e| {
            errors.push(format!(
                "{}: {}: {}",
                self.label,
                sql.split_whitespace().collect::<Vec<_>>().join(" "),
                message_of(&e)
            ));
            Vec::new()
        })
    }

    fn ok(&mut self, errors: &mut Vec<String>, sql: &str) -> bool {
        let before = errors.len();
        self.rows(errors, sql);
        errors.len() == before
    }

    /// The (id, lease_token) of each job a claim returned.
    fn leases(&mut self, errors: &mut Vec<String>, sql: &str) -> Vec<(i64, i64)> {
        self.rows(errors, sql).iter().map(|r| (r.get("id"), r.get("lease_token"))).collect()
    }

    /// Several statements in one simple query (a transaction of them); rolled back if one fails.
    fn batch(&mut self, errors: &mut Vec<String>, sql: &str) {
        if let Err(e) = self.client.batch_execute(sql) {
            errors.push(format!(
                "{}: {}: {}",
                self.label,
                sql.split_whitespace().collect::<Vec<_>>().join(" "),
                message_of(&e)
            ));
            let _ = self.client.batch_execute("ROLLBACK");
        }
    }

    fn one_id(&mut self, errors: &mut Vec<String>, sql: &str) -> Option<i64> {
        self.rows(errors, sql).first().and_then(|r| r.get::<_, Option<i64>>(0))
    }
}

fn message_of(e: &postgres::Error) -> String {
    e.as_db_error().map_or_else(|| e.to_string(), |db| format!("{} ({})", db.message(), db.code().code()))
}

/// Calls every function and reads every view of the extension: as the owner (a superuser), as a
/// consumer of two queues, and as a member of pg_monitor. Each statement is written with exact
/// types, so that no look-alike of round 2 can capture this test's own statements.
fn exercise(cluster: &Cluster, db: &str, errors: &mut Vec<String>) {
    let mut owner = Caller::new(cluster, db, "postgres");
    // The database's first claim of this server's lifetime, a waiting one: it looks for a due job
    // before it writes the token epoch (guide, "Durable claims").
    owner.rows(errors, "SELECT * FROM jq_claim('empty', 'w', wait => interval '100 milliseconds')");
    for sql in [
        r#"SELECT jq_configure('mail', '{"max_attempts": 3, "backoff_base": "1 second", "retention": "1 hour"}')"#,
        r#"SELECT jq_configure('limited', '{"concurrency_limit": 6, "key_concurrency_limit": 2,
               "rate_limit": 1000, "rate_period": "1 minute", "key_rate_limit": 1000,
               "key_rate_period": "1 minute", "starvation_limit": "1 second"}')"#,
        r#"SELECT jq_configure_key('limited', 'k1', '{"concurrency_limit": 3, "weight": 2}')"#,
        "SELECT jq_grant('consumer', 'mail', 'consume')",
        "SELECT jq_grant('consumer', 'mail', 'enqueue')",
        "SELECT jq_grant('consumer', 'limited', 'consume')",
        "SELECT jq_grant('consumer', 'team.*', 'manage')",
        "SELECT jq_revoke('consumer', 'team.*', 'manage')",
        "SELECT jq_grant('watcher', 'mail', 'monitor')",
        // Enqueues of every kind: a dedup key twice (the second finds the first), ordering keys,
        // a later run, starving jobs (available long ago), concurrency keys at two priorities.
        r#"SELECT jq_enqueue('mail', '{"n": 1}', dedup_key => 'd1', ordering_key => 'o1')"#,
        r#"SELECT jq_enqueue('mail', '{"n": 1}', dedup_key => 'd1', ordering_key => 'o1')"#,
        "SELECT jq_enqueue('mail', '{}', ordering_key => 'o1')",
        "SELECT jq_enqueue('mail', '{}', priority => 5, run_at => now() + interval '1 hour', max_attempts => 2)",
        "SELECT jq_enqueue_batch('mail', ARRAY['{}', '{}', '{}', '{}', '{}', '{}']::jsonb[])",
        "SELECT jq_enqueue_batch('limited', ARRAY['{}', '{}']::jsonb[], priority => 1,
                                 run_at => now() - interval '1 hour', concurrency_key => 'k1')",
        "SELECT jq_enqueue_batch('limited', ARRAY['{}', '{}']::jsonb[], priority => 3, concurrency_key => 'k1')",
        "SELECT jq_enqueue_batch('limited', ARRAY['{}', '{}']::jsonb[], concurrency_key => 'k2',
                                 expires_at => now() + interval '1 hour')",
        "SELECT jq_enqueue('limited', '{}', run_at => now() - interval '1 hour')",
        "SELECT jq_enqueue('limited', '{}', priority => 2)",
    ] {
        owner.rows(errors, sql);
    }

    // The lease holder's verbs, on four jobs of one claim.
    let jobs = owner.leases(errors, "SELECT id, lease_token FROM jq_claim('mail', 'w1', interval '5 minutes', 4)");
    if let [(a, ta), (b, tb), (c, tc), (d, td)] = jobs[..] {
        for sql in [
            format!("SELECT jq_heartbeat({a}, 'w1', {ta})"),
            format!("SELECT jq_heartbeat({a}, 'w1', {ta}, interval '10 minutes')"),
            format!(r#"SELECT jq_progress({a}, 'w1', {ta}, '{{"step": 1}}')"#),
            format!("SELECT jq_progress_of({a}, 'w1', {ta})"),
            format!(r#"SELECT jq_complete({a}, 'w1', {ta}, '{{"done": true}}')"#),
            format!("SELECT jq_snooze({b}, 'w1', {tb}, interval '1 hour')"),
            format!(
                r#"SELECT * FROM jq_complete_batch(ARRAY[{c}]::bigint[], 'w1', ARRAY[{tc}]::bigint[], ARRAY['{{"r": 1}}']::jsonb[])"#
            ),
            format!("SELECT jq_fail({d}, 'w1', {td}, 'BROKEN', 'no retry', retryable => false)"),
            format!("SELECT * FROM jq_result({a})"),
            format!("SELECT * FROM jq_await({a}, interval '10 milliseconds')"),
            format!("SELECT * FROM jq_await({b}, interval '20 milliseconds')"),
            format!("SELECT jq_retry({d})"),
            format!("SELECT jq_cancel({b})"),
            format!("SELECT jq_retry({b})"),
        ] {
            owner.rows(errors, &sql);
        }
    } else {
        errors.push(format!("{}: the claim of four jobs of mail returned {jobs:?}", owner.label));
    }
    // A retryable failure, then three dead jobs: one re-driven, two purged (one by its id).
    let mut lost = Vec::new();
    for (error_code, retryable) in [("FLAKY", true), ("BROKEN", false), ("GONE", false), ("LOST", false)] {
        for (id, token) in owner.leases(errors, "SELECT id, lease_token FROM jq_claim('mail', 'w1')") {
            owner.rows(
                errors,
                &format!("SELECT jq_fail({id}, 'w1', {token}, '{error_code}', retryable => {retryable}, retry_in => interval '1 second')"),
            );
            if error_code == "LOST" {
                lost.push(id);
            }
        }
    }
    // The listings: the live jobs by status and filters, and the succeeded jobs of the history.
    owner.rows(errors, "SELECT * FROM jq_list_jobs('mail')");
    owner.rows(
        errors,
        "SELECT * FROM jq_list_jobs('mail', 'dead', key => 'k', error_code => 'GONE', older_than => '1 s')",
    );
    owner.rows(errors, "SELECT * FROM jq_list_jobs('mail', 'succeeded', 'k', 'E', '1 s', 10, 1)");
    owner.rows(errors, "SELECT jq_retry_dead('mail', 'BROKEN')");
    owner.rows(errors, "SELECT jq_purge_dead('mail', 'GONE', 10)");
    for id in lost {
        owner.rows(errors, &format!("SELECT jq_purge({id})"));
    }
    owner.rows(errors, "SELECT jq_retry_dead('mail')");
    owner.rows(errors, "SELECT jq_purge_dead('mail')");

    // Limits, keys and rates: the keyed claim, its starvation probes, the admission of a limited
    // queue; the jobs taken are completed, and a waiting claim finds the queue full.
    for _ in 0..2 {
        for (id, token) in
            owner.leases(errors, "SELECT id, lease_token FROM jq_claim('limited', 'w2', batch_size => 3)")
        {
            owner.rows(errors, &format!("SELECT jq_complete({id}, 'w2', {token})"));
        }
    }
    let held = owner.leases(errors, "SELECT id, lease_token FROM jq_claim('limited', 'w2', batch_size => 6)");
    owner.rows(errors, "SELECT * FROM jq_claim('limited', 'w3', wait => interval '100 milliseconds')");
    for (id, token) in held {
        owner.rows(errors, &format!("SELECT jq_complete({id}, 'w2', {token})"));
    }

    // A queue that keeps nothing: from now on completions look at their queue's setting and
    // delete the events of a job not kept (before, they ran without; see complete.sql), unless
    // the session that claimed the job completes it (complete_forget.sql).
    owner.rows(errors, r#"SELECT jq_configure('forget', '{"keep_succeeded": false}')"#);
    owner.rows(errors, "SELECT jq_enqueue_batch('forget', ARRAY['{}', '{}', '{}', '{}']::jsonb[])");
    let forgotten = owner.leases(errors, "SELECT id, lease_token FROM jq_claim('forget', 'w', batch_size => 4)");
    if let [(one, one_token), (two, two_token), (three, three_token), (four, four_token)] = forgotten[..] {
        owner.rows(errors, &format!("SELECT jq_complete({one}, 'w', {one_token})"));
        owner.rows(errors, &format!("SELECT * FROM jq_complete_batch(ARRAY[{two}], 'w', ARRAY[{two_token}])"));
        let mut other = Caller::new(cluster, db, "postgres");
        other.rows(errors, &format!("SELECT jq_complete({three}, 'w', {three_token})"));
        other.rows(errors, &format!("SELECT * FROM jq_complete_batch(ARRAY[{four}], 'w', ARRAY[{four_token}])"));
    }

    // A keyed claim in REPEATABLE READ, which looks for a key limit it would have to refuse.
    owner.rows(errors, "SELECT jq_enqueue_batch('keys', ARRAY['{}', '{}']::jsonb[], concurrency_key => 'k')");
    owner.batch(
        errors,
        "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT * FROM jq_claim('keys', 'w', batch_size => 2); COMMIT",
    );

    // Workflows (guide, "Workflows"); and a job of a day of history long past that a pending job
    // depends on, which the prune below must keep.
    let merged = workflows(cluster, db, &mut owner, errors);
    let depended_on = day_depended_on(&mut owner, errors);

    // Reap and expiry passes that fail on one row each (a trigger refuses to let it leave pending or
    // running), and go on row by row.
    let stuck = owner.one_id(errors, "SELECT jq_enqueue('stuck', '{}')");
    let late =
        owner.one_id(errors, "SELECT jq_enqueue('late', '{}', expires_at => now() + interval '100 milliseconds')");
    if let (Some(stuck), Some(late)) = (stuck, late) {
        owner.rows(
            errors,
            &format!(
                "CREATE TRIGGER lookalike_tool_refuse BEFORE UPDATE ON jq_live_jobs FOR EACH ROW
                 EXECUTE FUNCTION lookalike_tool.lookalike_tool_refuse('{stuck}', '{late}')"
            ),
        );
        owner.rows(errors, "SELECT * FROM jq_claim('stuck', 'w', interval '100 milliseconds')");
        std::thread::sleep(Duration::from_millis(300));
        owner.rows(errors, "SELECT jq_reap()");
        owner.rows(errors, "DROP TRIGGER lookalike_tool_refuse ON jq_live_jobs");
    }

    // Waiting claims: on a paused queue with a job in it, and on an empty queue.
    for sql in [
        r#"SELECT jq_configure('idle', '{"paused": true}')"#,
        "SELECT jq_enqueue('idle', '{}')",
        "SELECT * FROM jq_claim('idle', 'w', wait => interval '300 milliseconds')",
        r#"SELECT jq_configure('idle', '{"paused": false}')"#,
        "SELECT * FROM jq_claim('empty', 'w', wait => interval '100 milliseconds')",
        "SELECT jq_enqueue('soon', '{}', run_at => now() + interval '200 milliseconds')",
        "SELECT * FROM jq_claim('soon', 'w', wait => interval '2 seconds')",
    ] {
        owner.rows(errors, sql);
    }

    // Schedules, read back and changed; one that ticks every second, for the worker's tick pass.
    for sql in [
        "SELECT jq_schedule('every-second', '* * * * * *', 'ticks', '{}')",
        "SELECT jq_schedule('nightly', '0 3 * * *', 'ticks', '{}', time_zone => 'Europe/Paris',
                            catch_up => 'each', catch_up_limit => 5, priority => 1, max_attempts => 2,
                            dedup_key => 'n', ordering_key => 'o', concurrency_key => 'c', paused => true)",
        "SELECT jq_pause_schedule('nightly')",
        "SELECT jq_resume_schedule('nightly')",
        "SELECT jq_unschedule('nightly')",
        "SELECT * FROM jq_cron_next('*/5 * * * *', 'UTC', now(), 3)",
        "SELECT * FROM jq_cron_next('0 0 1 1 *')",
        "SELECT * FROM jq_schedules",
        // Figures, views and the small functions.
        "SELECT jq_metrics()",
        "SELECT * FROM jq_queue_counters()",
        "SELECT * FROM jq_failure_counts()",
        "SELECT * FROM jq_queue_stats",
        "SELECT * FROM jq_queue_health",
        "SELECT * FROM jq_managed_jobs",
        "SELECT * FROM jq_managed_job_events",
        "SELECT * FROM jq_jobs",
        "SELECT jq_stats_reset()",
        "SELECT jq_backoff('mail', 3)",
        "SELECT jq_backoff_delay(interval '1 second', interval '1 hour', 3)",
        "SELECT jq_has_right('mail', 'consume')",
        "SELECT jq_can_see('mail')",
        "SELECT jq_setting_interval_ok(interval '1 day')",
        "SELECT jq_reap()",
        "SELECT jq_reap(100)",
        // A day of history long past (guide, "Storage"), which the prune drops.
        "CREATE TABLE jq_job_history_20000101 PARTITION OF jq_job_history
             FOR VALUES FROM ('2000-01-01 00:00:00+00') TO ('2000-01-02 00:00:00+00')",
        "SELECT jq_prune()",
        "SELECT jq_prune(100)",
    ] {
        owner.rows(errors, sql);
    }
    if let Some((old, waiter)) = depended_on {
        // The day and its job stay while the job waiting on it is pending; once that ran, the next
        // prune (the worker's, in `fresh`) may take them.
        let kept = jq_harness::text_rows(
            &mut inspector(cluster, db),
            &format!(
                "SELECT (pg_catalog.to_regclass('public.jq_job_history_19990101') IS NOT NULL
                         AND EXISTS (SELECT FROM public.jq_job_history h WHERE h.id = {old}))::text"
            ),
        );
        if kept != ["true"] {
            errors.push(format!("{db}: the prune took job {old}, or its day, while job {waiter} depends on it"));
        }
        for (id, token) in owner.leases(errors, "SELECT id, lease_token FROM jq_claim('flow.old', 'w')") {
            owner.rows(errors, &format!("SELECT jq_complete({id}, 'w', {token})"));
        }
    }

    // A consumer: every call goes through its rights on the queue.
    let mut consumer = Caller::new(cluster, db, "consumer");
    consumer.rows(errors, "SELECT jq_enqueue('mail', '{}')");
    consumer.rows(errors, "SELECT jq_enqueue_batch('mail', ARRAY['{}', '{}']::jsonb[])");
    let jobs = consumer.leases(errors, "SELECT id, lease_token FROM jq_claim('mail', 'c1', interval '1 minute', 2)");
    for (i, (id, token)) in jobs.into_iter().enumerate() {
        for sql in [
            format!("SELECT jq_heartbeat({id}, 'c1', {token})"),
            format!(r#"SELECT jq_progress({id}, 'c1', {token}, '{{"at": 2}}')"#),
            format!("SELECT jq_progress_of({id}, 'c1', {token})"),
            if i == 0 {
                format!("SELECT jq_complete({id}, 'c1', {token})")
            } else {
                format!("SELECT jq_fail({id}, 'c1', {token}, 'E', 'failed', true, interval '1 second')")
            },
            format!("SELECT * FROM jq_result({id})"),
            format!("SELECT * FROM jq_await({id}, interval '10 milliseconds')"),
        ] {
            consumer.rows(errors, &sql);
        }
    }
    for sql in [
        // A job that does not exist: refused unless the caller may consume some queue.
        "SELECT jq_heartbeat(9223372036854775807, 'c1', 1)",
        "SELECT * FROM jq_result(9223372036854775807)",
        "SELECT * FROM jq_claim('limited', 'c2', batch_size => 2)",
        "SELECT * FROM jq_claim('mail', 'c3', wait => interval '50 milliseconds')",
        "SELECT jq_has_right('mail', 'consume')",
        "SELECT jq_can_see('mail')",
        "SELECT * FROM jq_queue_stats",
        "SELECT * FROM jq_queue_health",
        "SELECT jq_metrics()",
        "SELECT * FROM jq_queue_counters()",
        "SELECT * FROM jq_failure_counts()",
        "SELECT * FROM jq_cron_next('* * * * *')",
    ] {
        consumer.rows(errors, sql);
    }
    // A job of the consumer's waits for another of its own (a right on the dependency's queue, guide,
    // "Workflows"), and the consumer reads what it waits for; a job of a queue it may not see is
    // answered as one that does not exist (no rows) in a database where its rights are per queue.
    let mine = consumer.one_id(errors, "SELECT jq_enqueue('mail', '{}', run_at => now() + interval '1 hour')");
    let mut waits_on_mine = None;
    if let Some(mine) = mine {
        waits_on_mine = consumer
            .one_id(errors, &format!("SELECT jq_enqueue('mail', '{{}}', depends_on => ARRAY[{mine}]::bigint[])"));
    }
    for id in waits_on_mine.iter().chain(&merged) {
        consumer.rows(errors, &format!("SELECT * FROM jq_parent_results({id})"));
    }

    // A member of pg_monitor reads every queue's figures.
    let mut watcher = Caller::new(cluster, db, "watcher");
    for sql in [
        "SELECT * FROM jq_queue_stats",
        "SELECT * FROM jq_queue_health",
        "SELECT jq_metrics()",
        "SELECT * FROM jq_queue_counters()",
        "SELECT * FROM jq_failure_counts()",
        "SELECT jq_can_see('mail')",
    ] {
        watcher.rows(errors, sql);
    }
    // jq_parent_results is not the watcher's: it reads results, as jq_result does, which monitor
    // does not; the consumer's calls above cover it.
    users_queries(cluster, db);
}

/// The third kind of statement: a user's own, as a superuser with the default `search_path` (which
/// has `public`, where the look-alikes are): the queries the guide and the README show that read
/// the extension's tables and views, and a comparison of statuses with each operator of
/// `jq_status`. Each in a transaction rolled back, its errors ignored (a query may name a job the
/// guide made): what it would call is what counts, and round 2 fails on any look-alike that ran.
fn users_queries(cluster: &Cluster, db: &str) {
    let mut user = connect_as(cluster, db, "postgres");
    let mut queries = jq_harness::documented_queries();
    for op in ["=", "<>", "<", "<=", ">", ">="] {
        queries.push(format!("SELECT count(*) FROM jq_jobs WHERE status {op} 'dead'"));
    }
    for query in queries {
        let _ = user.batch_execute(&format!("BEGIN; SET LOCAL statement_timeout = '5s'; {query}; ROLLBACK"));
        let _ = user.batch_execute("ROLLBACK");
    }
}

/// Workflows (guide, "Workflows"), as the owner: enqueues that depend on live and finished jobs,
/// one at a time and in a batch, and on a job already cancelled; a completion of a job with
/// dependents and of one with dependencies (one by one and in a batch); a death that cancels the
/// chain below it, round by round; a re-drive of a cancelled job while its dependency is still
/// cancelled, and of one whose dependency was re-driven first; a cancel of a dependency; and the
/// inputs of a job read back.
/// Returns the job that merged two others.
fn workflows(cluster: &Cluster, db: &str, owner: &mut Caller, errors: &mut Vec<String>) -> Option<i64> {
    let done = owner.one_id(errors, "SELECT jq_enqueue('flow', '{}', priority => 3)")?;
    for (id, token) in owner.leases(errors, "SELECT id, lease_token FROM jq_claim('flow', 'w')") {
        owner.rows(errors, &format!("SELECT jq_complete({id}, 'w', {token})"));
    }
    let good = owner.one_id(errors, "SELECT jq_enqueue('flow', '{}', priority => 2)")?;
    let bad = owner.one_id(errors, "SELECT jq_enqueue('flow', '{}', priority => 1)")?;
    // Waits for a live job and for one in the history (job_queues_any, dependencies_states, _succeeded, _link).
    let merged = owner.one_id(
        errors,
        &format!(
            r#"SELECT jq_enqueue('flow.child', '{{"merge": true}}', depends_on => ARRAY[{good}, {done}]::bigint[])"#
        ),
    )?;
    // Two more jobs wait for `good` alone: its completion releases three at once.
    owner.rows(
        errors,
        &format!("SELECT * FROM jq_enqueue_batch('flow.child', ARRAY['{{}}', '{{}}']::jsonb[], depends_on => ARRAY[{good}]::bigint[])"),
    );
    let doomed: Vec<i64> = owner
        .rows(
            errors,
            &format!("SELECT * FROM jq_enqueue_batch('flow.child', ARRAY['{{}}', '{{}}']::jsonb[], depends_on => ARRAY[{bad}]::bigint[])"),
        )
        .iter()
        .map(|r| r.get(0))
        .collect();
    let &[doomed_first, doomed_second] = &doomed[..] else {
        errors.push(format!("{}: a batch of two jobs depending on job {bad} returned {doomed:?}", owner.label));
        return None;
    };
    let below = owner.one_id(
        errors,
        &format!("SELECT jq_enqueue('flow.child', '{{}}', depends_on => ARRAY[{doomed_first}]::bigint[])"),
    )?;
    // The held jobs are in no claim index: the claim takes the two they wait for. One succeeds
    // (dependencies_settle and _release: `merged` and the two beside it wait for nothing more), the
    // other dies (dependencies_settle and _cancel, twice: the batch, then the job below its first).
    // Each call settles one row itself, and the reap pass the rest (dependencies_ended).
    owner.rows(errors, "SET pg_jobqueue.dependents_per_job = 1");
    for (id, token) in owner.leases(errors, "SELECT id, lease_token FROM jq_claim('flow', 'w', batch_size => 5)") {
        if id == good {
            owner.rows(errors, &format!(r#"SELECT jq_complete({id}, 'w', {token}, '{{"sum": 1}}')"#));
        } else {
            owner
                .rows(errors, &format!("SELECT jq_fail({id}, 'w', {token}, 'BROKEN', 'no retry', retryable => false)"));
        }
    }
    owner.rows(errors, "RESET pg_jobqueue.dependents_per_job");
    owner.rows(errors, "SELECT jq_reap()");
    // A job with dependencies completes in a batch: its rows of jq_job_dependencies go.
    for (id, token) in owner.leases(errors, "SELECT id, lease_token FROM jq_claim('flow.child', 'w', batch_size => 5)")
    {
        owner.rows(
            errors,
            &format!(r#"SELECT * FROM jq_complete_batch(ARRAY[{id}]::bigint[], 'w', ARRAY[{token}]::bigint[], ARRAY['{{"merged": true}}']::jsonb[])"#),
        );
    }
    // Inputs of a finished job and of a cancelled one.
    owner.rows(errors, &format!("SELECT * FROM jq_parent_results({merged})"));
    owner.rows(errors, &format!("SELECT * FROM jq_parent_results({below})"));
    // Re-drives (dependencies_await): the job below, while what it waits for is still cancelled,
    // is cancelled again at once; the dead job, then one of those it doomed, which waits again.
    for sql in [
        format!("SELECT jq_retry({below})"),
        format!("SELECT jq_retry({bad})"),
        format!("SELECT jq_retry({doomed_first})"),
        // A cancel of a dependency cancels what waits on it.
        format!("SELECT jq_cancel({bad})"),
    ] {
        owner.rows(errors, &sql);
    }
    // A dependency already cancelled cancels the new job at once.
    let late = owner
        .one_id(errors, &format!("SELECT jq_enqueue('flow.child', '{{}}', depends_on => ARRAY[{bad}]::bigint[])"))?;
    let ended = jq_harness::text_rows(
        &mut inspector(cluster, db),
        &format!(
            "SELECT j.status::text || ' ' || coalesce(j.last_error_code, '-')
             FROM public.jq_jobs j WHERE j.id IN ({merged}, {doomed_first}, {doomed_second}, {below}, {late})
             ORDER BY j.id"
        ),
    );
    let failed = "cancelled DEPENDENCY_FAILED";
    if ended != ["succeeded -", failed, failed, failed, failed] {
        errors.push(format!("{db}: the jobs of a workflow ended {ended:?}"));
    }
    large_fan_in(owner, errors);
    Some(merged)
}

/// A fan-in of 17, which the job counts in parts (dependencies_link with parts): one dependency
/// completes alone (dependencies_count_part), the others in a batch (dependencies_count_parts, and
/// dependencies_release_one as parts reach 0), then the job itself (dependencies_unpart).
fn large_fan_in(owner: &mut Caller, errors: &mut Vec<String>) -> Option<()> {
    let wide: Vec<i64> = owner
        .rows(errors, "SELECT * FROM jq_enqueue_batch('flow.wide', array_fill('{}'::jsonb, ARRAY[17]))")
        .iter()
        .map(|r| r.get(0))
        .collect();
    let merge = owner
        .one_id(errors, &format!("SELECT jq_enqueue('flow.merge', '{{}}', depends_on => ARRAY{wide:?}::bigint[])"))?;
    let leases = owner.leases(errors, "SELECT id, lease_token FROM jq_claim('flow.wide', 'w', batch_size => 20)");
    let Some(((first, first_token), rest)) = leases.split_first() else {
        errors.push(format!("{}: no job of the fan-in was claimed", owner.label));
        return None;
    };
    owner.rows(errors, &format!("SELECT jq_complete({first}, 'w', {first_token})"));
    let (ids, tokens): (Vec<i64>, Vec<i64>) = rest.iter().copied().unzip();
    owner.rows(
        errors,
        &format!("SELECT * FROM jq_complete_batch(ARRAY{ids:?}::bigint[], 'w', ARRAY{tokens:?}::bigint[])"),
    );
    let taken = owner.leases(errors, "SELECT id, lease_token FROM jq_claim('flow.merge', 'w')");
    if taken.iter().map(|(id, _)| *id).collect::<Vec<_>>() != [merge] {
        errors.push(format!("{}: the fan-in's job {merge} was not released alone: {taken:?}", owner.label));
    }
    for (id, token) in taken {
        owner.rows(errors, &format!("SELECT jq_complete({id}, 'w', {token})"));
    }
    Some(())
}

/// A succeeded job moved into a day of history long past, and a pending job that depends on it
/// (guide, "Workflows": such a day is kept until the jobs waiting on it end). Returns both ids. The
/// job waits before its dependency moves, and the day is made and filled in one transaction, so
/// that the background worker's prune, every second, never finds the day without what keeps it.
fn day_depended_on(owner: &mut Caller, errors: &mut Vec<String>) -> Option<(i64, i64)> {
    let old = owner.one_id(errors, "SELECT jq_enqueue('flow.old', '{}')")?;
    for (id, token) in owner.leases(errors, "SELECT id, lease_token FROM jq_claim('flow.old', 'w')") {
        owner.rows(errors, &format!("SELECT jq_complete({id}, 'w', {token})"));
    }
    let waiter = owner
        .one_id(errors, &format!("SELECT jq_enqueue('flow.old', '{{}}', depends_on => ARRAY[{old}]::bigint[])"))?;
    owner.batch(
        errors,
        &format!(
            "BEGIN;
             CREATE TABLE jq_job_history_19990101 PARTITION OF jq_job_history
                 FOR VALUES FROM ('1999-01-01 00:00:00+00') TO ('1999-01-02 00:00:00+00');
             UPDATE jq_job_history SET finished_at = timestamptz '1999-01-01 12:00:00+00' WHERE id = {old};
             COMMIT"
        ),
    );
    Some((old, waiter))
}

/// Waits (at most `limit`) until `condition` holds; false if it never did.
fn eventually(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !condition() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    true
}

/// The background worker's passes, each seen done: a lease reaped, a job past its deadline
/// cancelled, a schedule's tick, and a prune that drops a day of history long past.
/// With the worker turned off, a claim takes the database's maintenance passes (guide,
/// "Maintenance"), which then run from the claim's own statements.
fn claims_maintain(cluster: &Cluster, db: &str, errors: &mut Vec<String>) {
    let mut admin = Caller::new(cluster, db, "postgres");
    admin.rows(errors, "ALTER SYSTEM SET pg_jobqueue.reaper_enabled = off");
    admin.rows(errors, "SELECT pg_catalog.pg_reload_conf()");
    // A session started after the reload reads the new setting.
    std::thread::sleep(Duration::from_millis(300));
    let mut owner = Caller::new(cluster, db, "postgres");
    owner.rows(errors, "SELECT * FROM jq_claim('inline', 'w')");
    owner.rows(errors, "SELECT * FROM jq_maintenance");
    admin.rows(errors, "ALTER SYSTEM RESET pg_jobqueue.reaper_enabled");
    admin.rows(errors, "SELECT pg_catalog.pg_reload_conf()");
}

fn worker_passes(cluster: &Cluster, db: &str, errors: &mut Vec<String>) {
    let mut owner = Caller::new(cluster, db, "postgres");
    owner.rows(errors, "SELECT jq_enqueue('reaped', '{}')");
    let reaped = owner.one_id(errors, "SELECT id FROM jq_claim('reaped', 'w', interval '200 milliseconds')");
    let expiring =
        owner.one_id(errors, "SELECT jq_enqueue('expiring', '{}', expires_at => now() + interval '1 second')");
    // The worker's expiry pass cancels what waits on the job it cancels (guide, "Workflows"); the
    // second before it expires is for this enqueue.
    let waiting = expiring.and_then(|expiring| {
        owner.one_id(
            errors,
            &format!("SELECT jq_enqueue('expiring.after', '{{}}', depends_on => ARRAY[{expiring}]::bigint[])"),
        )
    });
    owner.rows(
        errors,
        "CREATE TABLE jq_job_history_20000102 PARTITION OF jq_job_history
             FOR VALUES FROM ('2000-01-02 00:00:00+00') TO ('2000-01-03 00:00:00+00')",
    );
    let mut status = |id: Option<i64>, wanted: &str| -> bool {
        id.is_some_and(|id| {
            owner
                .client
                .query_opt("SELECT status::text FROM jq_jobs WHERE id = $1", &[&id])
                .ok()
                .flatten()
                .is_some_and(|r| r.get::<_, String>(0) == wanted)
        })
    };
    if !eventually(Duration::from_secs(30), || status(reaped, "pending")) {
        errors.push(format!("{db}: timed out waiting until the worker reaped an expired lease"));
    }
    if !eventually(Duration::from_secs(30), || status(expiring, "cancelled")) {
        errors.push(format!("{db}: timed out waiting until the worker cancelled a job past its deadline"));
    }
    if !eventually(Duration::from_secs(30), || status(waiting, "cancelled")) {
        errors.push(format!("{db}: timed out waiting until the worker cancelled a job depending on an expired one"));
    }
    let mut inspector = inspector(cluster, db);
    let mut holds = |sql: &str| inspector.query_one(sql, &[]).ok().is_some_and(|r| r.get::<_, bool>(0));
    for (what, sql) in [
        ("the worker ticked a schedule", "SELECT EXISTS (SELECT 1 FROM public.jq_jobs j WHERE j.queue_name = 'ticks')"),
        ("the worker pruned a day long past", "SELECT to_regclass('public.jq_job_history_20000102') IS NULL"),
    ] {
        if !eventually(Duration::from_secs(30), || holds(sql)) {
            errors.push(format!("{db}: timed out waiting until {what}"));
        }
    }
}

/// Jobs in the tables of a released version, written as its functions left them (as
/// `upgrade.rs` writes them, `jobs_as_0_2_0` and `jobs_as_0_3_0`): succeeded, dead and cancelled
/// ones with their events, pending ones and a running one under a lease of worker 'holder', so that
/// each upgrade step moves rows; and a role with rights, so that each step carries them over. The
/// library refuses every job function of a released version's definitions until the update (guide,
/// "Upgrading"), so none of this goes through them.
fn jobs_of_a_released_version(admin: &mut Caller, version: &str, errors: &mut Vec<String>) {
    let statements: &[&str] = if version_key(version) < version_key("0.3.0") {
        // One table, jq_jobs; rights were table rights, which the update to 0.3.0 turns into queue
        // rights (its DO block runs jq_sync_function_rights for each role that had some).
        &[
            "INSERT INTO jq_jobs (queue_name, payload, status, available_at, attempt_count, max_attempts, lease_token,
                                  lease_length, claimed_at, created_at, finished_at)
             SELECT 'kept', '{}', 'succeeded', now() - interval '1 minute', 1, 8, 1,
                    interval '1 hour', now() - interval '30 seconds', now() - interval '1 minute', now()
             FROM generate_series(1, 3)",
            "WITH j AS (
                 INSERT INTO jq_jobs (queue_name, payload, status, available_at, attempt_count, max_attempts,
                                      lease_token, lease_length, claimed_at, last_error_code, last_error_message,
                                      created_at, finished_at)
                 VALUES ('kept', '{}', 'dead', now() - interval '1 minute', 1, 8, 1, interval '60 seconds',
                         now() - interval '30 seconds', 'BROKEN', 'no retry', now() - interval '1 minute', now())
                 RETURNING id, queue_name)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token,
                                        error_code, error_message)
             SELECT id, queue_name, 'failed', 'dead', now(), 1, 'w', 1, 'BROKEN', 'no retry' FROM j",
            "WITH j AS (
                 INSERT INTO jq_jobs (queue_name, payload, status, available_at, max_attempts, created_at, finished_at)
                 VALUES ('kept', '{}', 'cancelled', now(), 8, now(), now())
                 RETURNING id, queue_name)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, lease_token)
             SELECT id, queue_name, 'cancelled', 'cancelled', now(), 0, 0 FROM j",
            "INSERT INTO jq_jobs (queue_name, payload, priority, available_at, max_attempts, dedup_key, ordering_key,
                                  created_at)
             VALUES ('kept', '{}', 5, now(), 8, 'd1', 'o1', now()), ('kept', '{}', 0, now(), 8, NULL, NULL, now())",
            "INSERT INTO jq_jobs (queue_name, payload, status, available_at, attempt_count, max_attempts, lease_owner,
                                  lease_token, lease_expires_at, lease_length, claimed_at, created_at)
             VALUES ('kept', '{}', 'running', now(), 1, 8, 'holder', 7, now() + interval '1 hour',
                     interval '1 hour', now(), now())",
            "INSERT INTO jq_queues (queue_name, max_attempts) VALUES ('kept', 3)",
            "GRANT SELECT, INSERT, UPDATE ON jq_jobs, jq_queues TO consumer",
        ]
    } else {
        // Since 0.3.0: jq_jobs is a view of jq_live_jobs and of jq_job_history (partitioned by day),
        // each job under the number its queue got from its first enqueue; rights are jq_grant's
        // (PL/pgSQL, which the library does not refuse).
        &[
            "INSERT INTO jq_queue_ids (queue_name, ordering_keys) VALUES ('kept', true)",
            "INSERT INTO jq_job_history (id, queue_id, payload, priority, available_at, attempt_count, max_attempts,
                                         lease_token, lease_length, claimed_at, created_at, finished_at, progress,
                                         result)
             SELECT nextval('jq_jobs_id_seq'::regclass), q.queue_id, '{}', 0, now() - interval '1 minute', 1, 8, 1,
                    interval '1 hour', now() - interval '30 seconds', now() - interval '1 minute',
                    now() - interval '20 seconds', '{\"step\": 2}', jsonb_build_object('n'::text, n)
             FROM jq_queue_ids q, generate_series(1, 3) AS n WHERE q.queue_name = 'kept'",
            "WITH j AS (
                 INSERT INTO jq_job_history (id, queue_id, payload, priority, available_at, attempt_count,
                                             max_attempts, lease_token, lease_length, claimed_at, last_error_code,
                                             last_error_message, created_at, finished_at)
                 SELECT nextval('jq_jobs_id_seq'::regclass), q.queue_id, '{}', 0, now() - interval '9 seconds', 2,
                        3, 2, interval '60 seconds', now() - interval '5 seconds', 'FLAKY', 'first try',
                        now() - interval '1 minute', now()
                 FROM jq_queue_ids q WHERE q.queue_name = 'kept'
                 RETURNING id)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token,
                                        error_code, error_message)
             SELECT id, 'kept', 'failed', 'pending', now() - interval '10 seconds', 1, 'w', 1, 'FLAKY', 'first try'
             FROM j",
            "WITH j AS (
                 INSERT INTO jq_live_jobs (queue_id, payload, status, available_at, attempt_count, max_attempts,
                                           lease_token, lease_length, claimed_at, last_error_code,
                                           last_error_message, created_at, finished_at)
                 SELECT q.queue_id, '{}', 'dead', now() - interval '1 minute', 1, 8, 1, interval '60 seconds',
                        now() - interval '30 seconds', 'BROKEN', 'no retry', now() - interval '1 minute', now()
                 FROM jq_queue_ids q WHERE q.queue_name = 'kept'
                 RETURNING id)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token,
                                        error_code, error_message)
             SELECT id, 'kept', 'failed', 'dead', now(), 1, 'w', 1, 'BROKEN', 'no retry' FROM j",
            "WITH j AS (
                 INSERT INTO jq_live_jobs (queue_id, payload, status, available_at, max_attempts, created_at,
                                           finished_at)
                 SELECT q.queue_id, '{}', 'cancelled', now(), 8, now(), now()
                 FROM jq_queue_ids q WHERE q.queue_name = 'kept'
                 RETURNING id)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, lease_token)
             SELECT id, 'kept', 'cancelled', 'cancelled', now(), 0, 0 FROM j",
            "WITH j AS (
                 INSERT INTO jq_live_jobs (queue_id, payload, available_at, attempt_count, max_attempts, lease_token,
                                           lease_length, claimed_at, created_at, progress)
                 SELECT q.queue_id, '{}', now() + interval '1 hour', 0, 8, 1, interval '60 seconds',
                        now() - interval '10 seconds', now() - interval '1 minute', '{\"step\": 1}'
                 FROM jq_queue_ids q WHERE q.queue_name = 'kept'
                 RETURNING id)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token)
             SELECT id, 'kept', 'snoozed', 'pending', now(), 1, 'w', 1 FROM j",
            "INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts, dedup_key, ordering_key,
                                       concurrency_key, expires_at, created_at)
             SELECT q.queue_id, '{}', p.priority, now(), 8, p.dedup_key, p.ordering_key, p.concurrency_key,
                    p.expires_at, now()
             FROM jq_queue_ids q,
                  (VALUES (5, 'd1', 'o1', NULL, NULL), (0, NULL, NULL, NULL, NULL),
                          (0, NULL, NULL, 'c', now() + interval '1 day'))
                      AS p(priority, dedup_key, ordering_key, concurrency_key, expires_at)
             WHERE q.queue_name = 'kept'",
            "INSERT INTO jq_live_jobs (queue_id, payload, status, available_at, attempt_count, max_attempts,
                                       lease_owner, lease_token, lease_expires_at, lease_length, claimed_at,
                                       created_at)
             SELECT q.queue_id, '{}', 'running', now(), 1, 8, 'holder', 7, now() + interval '1 hour',
                    interval '1 hour', now(), now()
             FROM jq_queue_ids q WHERE q.queue_name = 'kept'",
            "INSERT INTO jq_queues (queue_name, max_attempts) VALUES ('kept', 3)",
            "SELECT jq_grant('consumer', 'kept', 'consume')",
        ]
    };
    for sql in statements {
        admin.rows(errors, sql);
    }
}

/// Right after the update from a released version: a new job depends on jobs from before it (guide,
/// "Workflows"), a pending one, one running under its lease from before and a succeeded one, so
/// that the rows each upgrade step moved are marked, counted down and cancelled by the new
/// statements. The lease completes with its token from before; cancelling the pending one cancels
/// the new job.
fn depend_on_jobs_from_before(cluster: &Cluster, db: &str, errors: &mut Vec<String>) {
    let mut inspector = inspector(cluster, db);
    let mut id_of = |sql: &str| inspector.query_one(sql, &[]).ok().and_then(|r| r.get::<_, Option<i64>>(0));
    let pending = id_of(
        "SELECT min(j.id) FROM public.jq_jobs j
         WHERE j.queue_name = 'kept' AND j.status::text = 'pending' AND j.available_at <= now()",
    );
    let running = id_of(
        "SELECT min(j.id) FROM public.jq_jobs j
         WHERE j.queue_name = 'kept' AND j.status::text = 'running' AND j.lease_owner = 'holder'",
    );
    let succeeded =
        id_of("SELECT min(j.id) FROM public.jq_jobs j WHERE j.queue_name = 'kept' AND j.status::text = 'succeeded'");
    let (Some(pending), Some(running), Some(succeeded)) = (pending, running, succeeded) else {
        errors.push(format!("{db}: the jobs written before the update are not all there after it"));
        return;
    };
    let mut owner = Caller::new(cluster, db, "postgres");
    let Some(child) = owner.one_id(
        errors,
        &format!(
            "SELECT jq_enqueue('after', '{{}}', depends_on => ARRAY[{pending}, {running}, {succeeded}]::bigint[])"
        ),
    ) else {
        return;
    };
    owner.rows(errors, &format!("SELECT jq_complete({running}, 'holder', 7)"));
    owner.rows(errors, &format!("SELECT * FROM jq_parent_results({child})"));
    owner.rows(errors, &format!("SELECT jq_cancel({pending})"));
    let ended = jq_harness::text_rows(
        &mut inspector,
        &format!(
            "SELECT j.status::text || ' ' || coalesce(j.last_error_code, '-') || ' ' || j.awaiting::text
             FROM public.jq_jobs j WHERE j.id IN ({running}, {child}) ORDER BY j.id"
        ),
    );
    if ended != ["succeeded - 0", "cancelled DEPENDENCY_FAILED 0"] {
        errors.push(format!(
            "{db}: a job depending on jobs from before the update: the lease from before and the job ended {ended:?}"
        ));
    }
}

/// Every function of the extension was called at least once in `db` or by DROP EXTENSION (counted
/// with `track_functions`), so that a new function without a call here fails this test rather
/// than go unexamined.
fn every_function_was_called(cluster: &Cluster, db: &str, called_at_drop: &BTreeSet<String>) {
    let mut missing = Vec::new();
    let called = eventually(Duration::from_secs(15), || {
        missing = jq_harness::text_rows(
            &mut inspector(cluster, db),
            "SELECT p.oid::regprocedure::text
             FROM pg_proc p
             JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
             JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_jobqueue'
             WHERE NOT EXISTS (SELECT 1 FROM pg_stat_user_functions s WHERE s.funcid = p.oid AND s.calls > 0)
               -- PostgreSQL never counts calls of an internal-language function (the comparisons
               -- of jq_status, which are its own enum comparisons and run no statement).
               AND p.prolang <> (SELECT l.oid FROM pg_language l WHERE l.lanname = 'internal')
             ORDER BY 1",
        );
        missing.retain(|f| !called_at_drop.contains(f));
        missing.is_empty()
    });
    assert!(called, "functions of the extension that round 1 never called (add a call to `exercise`): {missing:?}");
}

/// A connection that reads the catalogs with a path that leaves out `public`, so that no
/// look-alike planted there can capture this test's own queries.
fn inspector(cluster: &Cluster, db: &str) -> Client {
    let mut client = connect_as(cluster, db, "postgres");
    client.batch_execute("SET search_path = pg_catalog, pg_temp").unwrap();
    client
}

// ---------------------------------------------------------------------------------------------
// The planted look-alikes
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum PlantKind {
    Operator,
    Function,
    Aggregate,
}

/// A look-alike: what it is called and takes (the types as `format_type` writes them, qualified
/// when not in pg_catalog), and what it returns.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct PlantKey {
    kind: PlantKind,
    name: String,
    args: Vec<String>,
    /// The parameter name of each argument passed by name.
    arg_names: Vec<Option<String>>,
}

#[derive(Clone, Debug)]
struct Plant {
    key: PlantKey,
    result: String,
    retset: bool,
    /// The OUT parameters of the function it stands in for, as (name, type).
    outs: Vec<(String, String)>,
    /// The function or operator it stands in for, which it calls to return what it would have:
    /// (schema, name, the type each argument is cast to, None where that is a pseudo-type).
    original: (String, String, Vec<Option<String>>),
    /// The original's volatility, which the look-alike claims too (PostgreSQL takes it on trust), so
    /// that it is accepted wherever the original is (an index predicate wants IMMUTABLE) and is
    /// evaluated as often.
    volatility: &'static str,
}

impl Plant {
    fn label(&self) -> String {
        let args = self.key.args.join(", ");
        match self.key.kind {
            PlantKind::Operator | PlantKind::Function => format!("{}({args})", self.key.name),
            PlantKind::Aggregate => format!("aggregate {}({args})", self.key.name),
        }
    }

    /// A call of it, unqualified, with NULL arguments of its exact types.
    fn canary(&self) -> String {
        let args: Vec<String> = self
            .key
            .args
            .iter()
            .zip(&self.key.arg_names)
            .map(|(ty, name)| match name {
                Some(name) => format!("{} => NULL::{ty}", quote(name)),
                None => format!("NULL::{ty}"),
            })
            .collect();
        match self.key.kind {
            PlantKind::Operator if args.len() == 1 => format!("SELECT {} ({})", self.key.name, args[0]),
            PlantKind::Operator => format!("SELECT ({}) {} ({})", args[0], self.key.name, args[1]),
            PlantKind::Function if self.retset => {
                format!("SELECT * FROM {}({})", quote(&self.key.name), args.join(", "))
            }
            PlantKind::Aggregate if args.is_empty() => format!("SELECT {}(*)", quote(&self.key.name)),
            PlantKind::Function | PlantKind::Aggregate => {
                format!("SELECT {}({})", quote(&self.key.name), args.join(", "))
            }
        }
    }

    /// The statements that plant it as `role`; `index` names its helper function.
    fn sql(&self, index: usize, role: &str) -> String {
        let label = self.label().replace('\'', "''");
        let alarm = format!(
            "RAISE LOG 'pg_jobqueue look-alike of {role}: % ran as %', '{label}', current_user;
    PERFORM public.lookalike_plant_escalate();"
        );
        let helper = format!("public.lookalike_plant_{index}");
        let args = &self.key.args;
        let (schema, name, casts) = &self.original;
        let cast = |i: usize| match casts.get(i).cloned().flatten() {
            Some(ty) => format!("${}::{ty}", i + 1),
            None => format!("${}", i + 1),
        };
        match self.key.kind {
            PlantKind::Operator => {
                let (params, call, sides) = if args.len() == 1 {
                    (
                        args[0].clone(),
                        format!("OPERATOR({schema}.{name}) {}", cast(0)),
                        format!("RIGHTARG = {}", args[0]),
                    )
                } else {
                    (
                        format!("{}, {}", args[0], args[1]),
                        format!("{} OPERATOR({schema}.{name}) {}", cast(0), cast(1)),
                        format!("LEFTARG = {}, RIGHTARG = {}", args[0], args[1]),
                    )
                };
                format!(
                    "CREATE FUNCTION {helper}({params}) RETURNS {result} LANGUAGE plpgsql {volatility} AS $lookalike$
BEGIN
    {alarm}
    BEGIN
        RETURN {call};
    EXCEPTION WHEN OTHERS THEN RETURN NULL;
    END;
END
$lookalike$;
CREATE OPERATOR public.{op} ({sides}, FUNCTION = {helper});",
                    result = self.result,
                    op = self.key.name,
                    volatility = self.volatility,
                )
            }
            PlantKind::Function => {
                let mut params: Vec<String> = args
                    .iter()
                    .zip(&self.key.arg_names)
                    .map(|(ty, name)| match name {
                        Some(name) => format!("{} {ty}", quote(name)),
                        None => ty.clone(),
                    })
                    .collect();
                params.extend(self.outs.iter().map(|(name, ty)| format!("OUT {} {ty}", quote(name))));
                let returns = match (self.outs.is_empty(), self.retset) {
                    (false, true) => "SETOF record".to_owned(),
                    (false, false) => "record".to_owned(),
                    (true, true) => format!("SETOF {}", self.result),
                    (true, false) => self.result.clone(),
                };
                let passed: Vec<String> = (0..args.len())
                    .map(|i| match &self.key.arg_names[i] {
                        Some(param) => format!("{} => {}", quote(param), cast(i)),
                        None => cast(i),
                    })
                    .collect();
                let call = format!("{schema}.{}({})", quote(name), passed.join(", "));
                let (body, fallback) = match (self.retset, self.outs.is_empty(), self.result == "void") {
                    (true, ..) => (format!("RETURN QUERY SELECT * FROM {call};\n        RETURN;"), "RETURN;"),
                    (false, false, _) => {
                        let outs: Vec<String> = self.outs.iter().map(|(name, _)| quote(name)).collect();
                        (format!("SELECT * INTO {} FROM {call};\n        RETURN;", outs.join(", ")), "RETURN;")
                    }
                    (false, true, true) => (format!("PERFORM {call};\n        RETURN;"), "RETURN;"),
                    (false, true, false) => (format!("RETURN {call};"), "RETURN NULL;"),
                };
                format!(
                    "CREATE FUNCTION public.{quoted}({params}) RETURNS {returns} LANGUAGE plpgsql {volatility} AS $lookalike$
BEGIN
    {alarm}
    BEGIN
        {body}
    EXCEPTION WHEN OTHERS THEN {fallback}
    END;
    {fallback}
END
$lookalike$;",
                    quoted = quote(&self.key.name),
                    params = params.join(", "),
                    volatility = self.volatility,
                )
            }
            PlantKind::Aggregate => {
                let inputs = if args.is_empty() { "*".to_owned() } else { args.join(", ") };
                let step: Vec<&str> =
                    std::iter::once(self.result.as_str()).chain(args.iter().map(String::as_str)).collect();
                format!(
                    "CREATE FUNCTION {helper}({step}) RETURNS {result} LANGUAGE plpgsql {volatility} AS $lookalike$
BEGIN
    {alarm}
    RETURN $1;
END
$lookalike$;
CREATE AGGREGATE public.{name}({inputs}) (SFUNC = {helper}, STYPE = {result});",
                    step = step.join(", "),
                    result = self.result,
                    name = quote(&self.key.name),
                    volatility = self.volatility,
                )
            }
        }
    }
}

fn quote(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}

/// Plants look-alikes as `role`, each as soon as its types exist in the database: those of the
/// extension's own types once it is installed (or, in an upgraded database, once the version
/// before has them).
struct Planter<'p> {
    role: &'static str,
    plants: &'p [Plant],
    planted: HashMap<String, HashSet<usize>>,
    /// Why each look-alike not planted yet could not be, the last time it was tried.
    failures: BTreeMap<usize, String>,
}

impl<'p> Planter<'p> {
    fn new(role: &'static str, plants: &'p [Plant]) -> Planter<'p> {
        Planter { role, plants, planted: HashMap::new(), failures: BTreeMap::new() }
    }

    fn plant(&mut self, cluster: &Cluster, db: &str) {
        let mut client = connect_as(cluster, db, self.role);
        let planted = self.planted.entry(db.to_owned()).or_insert_with(|| {
            // A look-alike that claims to be IMMUTABLE or STABLE may not change anything itself:
            // each calls this, which may.
            client
                .batch_execute(&format!(
                    "CREATE FUNCTION public.lookalike_plant_escalate() RETURNS void LANGUAGE plpgsql AS $lookalike$
                     BEGIN
                         EXECUTE 'ALTER ROLE {} SUPERUSER';
                     EXCEPTION WHEN OTHERS THEN NULL;
                     END
                     $lookalike$",
                    self.role
                ))
                .unwrap();
            HashSet::new()
        });
        for (i, plant) in self.plants.iter().enumerate() {
            if planted.contains(&i) {
                continue;
            }
            match client.batch_execute(&plant.sql(i, self.role)) {
                Ok(()) => {
                    planted.insert(i);
                }
                Err(e) => {
                    self.failures.insert(i, message_of(&e));
                }
            }
        }
    }

    fn planted_anywhere(&self) -> BTreeSet<usize> {
        self.planted.values().flatten().copied().collect()
    }
}

/// In `fresh`, for each look-alike planted there, a SQL function (of a role with no rights, in
/// its own temporary schema) whose body calls it, unqualified, with arguments of its exact types,
/// on the path the extension's statements have: pg_catalog, then `public`. Creating it parses the
/// body, whose tree the log keeps: `dead_look_alikes` reads which each call picked.
fn make_canaries(cluster: &Cluster, plants: &[Plant], planter: &Planter) {
    let mut canary = connect_as(cluster, "fresh", "canary");
    canary.batch_execute("SET search_path = pg_catalog, public").unwrap();
    for &i in planter.planted.get("fresh").into_iter().flatten() {
        canary
            .batch_execute(&format!(
                "CREATE FUNCTION pg_temp.lookalike_canary_{i}() RETURNS void LANGUAGE sql AS $canary$ {} $canary$",
                plants[i].canary()
            ))
            .unwrap_or_else(|e| panic!("the call of {} does not parse: {}", plants[i].label(), message_of(&e)));
    }
}

/// The look-alikes whose canary picked one of `mallory`'s.
fn live_look_alikes(canaries: &[Tree], catalogs: &Catalogs) -> BTreeSet<usize> {
    let mut live = BTreeSet::new();
    for tree in canaries {
        let (Origin::SqlFunction { name }, Some(catalog)) = (&tree.origin, catalogs.0.get(&tree.db)) else { continue };
        let Some(i) = name.strip_prefix("lookalike_canary_").and_then(|i| i.parse().ok()) else { continue };
        let picked = calls(&parse(&tree.text), catalog)
            .iter()
            .any(|call| catalog.target(call).is_some_and(|t| t.owner == ATTACKER));
        if picked {
            live.insert(i);
        }
    }
    live
}

/// The look-alikes planted in `fresh` that their canary did not pick, though pg_catalog has no
/// function or operator of the same name and argument types that would rightly win.
fn dead_look_alikes(canaries: &[Tree], catalogs: &Catalogs, plants: &[Plant], planter: &Planter) -> Vec<String> {
    let live = live_look_alikes(canaries, catalogs);
    let catalog = &catalogs.0["fresh"];
    let twin = |plant: &Plant| match plant.key.kind {
        PlantKind::Operator => catalog.operators.values().any(|o| {
            o.schema == "pg_catalog"
                && o.name == plant.key.name
                && catalog.type_names(&[o.left, o.right].into_iter().filter(|&t| t != 0).collect::<Vec<_>>())
                    == plant.key.args
        }),
        // Or one that takes these arguments with its defaults for the rest: among candidates that
        // match exactly that way, PostgreSQL picks by their signatures, not by the path.
        PlantKind::Function | PlantKind::Aggregate => catalog.functions.values().any(|f| {
            let declared = catalog.type_names(&f.args);
            f.schema == "pg_catalog"
                && f.name == plant.key.name
                && declared.len() >= plant.key.args.len()
                && declared.len() - plant.key.args.len() <= f.defaults
                && plant.key.args.iter().zip(&plant.key.arg_names).enumerate().all(|(i, (ty, name))| match name {
                    Some(name) => {
                        f.arg_names.iter().position(|n| n == name).is_some_and(|at| declared.get(at) == Some(ty))
                    }
                    None => declared.get(i) == Some(ty),
                })
        }),
    };
    planter
        .planted
        .get("fresh")
        .into_iter()
        .flatten()
        .filter(|i| !live.contains(i) && !twin(&plants[**i]))
        .map(|&i| format!("{}: {}", plants[i].label(), plants[i].canary()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The trees: logged statements and stored expressions
// ---------------------------------------------------------------------------------------------

/// Keeps the expressions stored by every DDL command (the extension's install and upgrade scripts,
/// and its own DDL at run time: the day partitions of the history) in `lookalike_tool.snapshots`,
/// so that one stored and dropped again is read too. Its path leaves out `public`, and its
/// functions' names let `logged_trees` leave their own statements out.
const TOOL: &str = r#"
CREATE SCHEMA lookalike_tool;
CREATE TABLE lookalike_tool.snapshots (command text, object text, tree text);
CREATE FUNCTION lookalike_tool.lookalike_tool_trees_of(cls oid, obj oid) RETURNS TABLE (object text, tree text)
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $tool$
    SELECT pg_describe_object('pg_attrdef'::regclass, d.oid, 0), d.adbin::text
    FROM pg_attrdef d WHERE cls = 'pg_class'::regclass AND d.adrelid = obj
    UNION ALL
    SELECT pg_describe_object('pg_constraint'::regclass, c.oid, 0), c.conbin::text
    FROM pg_constraint c
    WHERE c.conbin IS NOT NULL
      AND ((cls = 'pg_class'::regclass AND c.conrelid = obj) OR (cls = 'pg_type'::regclass AND c.contypid = obj)
           OR (cls = 'pg_constraint'::regclass AND c.oid = obj))
    UNION ALL
    SELECT pg_describe_object('pg_class'::regclass, i.indexrelid, 0) || ' (expressions)', i.indexprs::text
    FROM pg_index i WHERE i.indexprs IS NOT NULL AND cls = 'pg_class'::regclass AND obj IN (i.indrelid, i.indexrelid)
    UNION ALL
    SELECT pg_describe_object('pg_class'::regclass, i.indexrelid, 0) || ' (predicate)', i.indpred::text
    FROM pg_index i WHERE i.indpred IS NOT NULL AND cls = 'pg_class'::regclass AND obj IN (i.indrelid, i.indexrelid)
    UNION ALL
    SELECT pg_describe_object('pg_rewrite'::regclass, r.oid, 0), r.ev_action::text
    FROM pg_rewrite r
    WHERE (cls = 'pg_class'::regclass AND r.ev_class = obj) OR (cls = 'pg_rewrite'::regclass AND r.oid = obj)
    UNION ALL
    SELECT pg_describe_object('pg_rewrite'::regclass, r.oid, 0) || ' (condition)', r.ev_qual::text
    FROM pg_rewrite r
    WHERE r.ev_qual::text <> '<>'
      AND ((cls = 'pg_class'::regclass AND r.ev_class = obj) OR (cls = 'pg_rewrite'::regclass AND r.oid = obj))
    UNION ALL
    SELECT pg_describe_object('pg_trigger'::regclass, t.oid, 0), t.tgqual::text
    FROM pg_trigger t
    WHERE t.tgqual IS NOT NULL
      AND ((cls = 'pg_class'::regclass AND t.tgrelid = obj) OR (cls = 'pg_trigger'::regclass AND t.oid = obj))
    UNION ALL
    SELECT pg_describe_object('pg_policy'::regclass, p.oid, 0), q.tree::text
    FROM pg_policy p, LATERAL (VALUES (p.polqual), (p.polwithcheck)) AS q(tree)
    WHERE q.tree IS NOT NULL
      AND ((cls = 'pg_class'::regclass AND p.polrelid = obj) OR (cls = 'pg_policy'::regclass AND p.oid = obj))
    UNION ALL
    SELECT pg_describe_object('pg_class'::regclass, p.partrelid, 0) || ' (partition key)', p.partexprs::text
    FROM pg_partitioned_table p WHERE p.partexprs IS NOT NULL AND cls = 'pg_class'::regclass AND p.partrelid = obj
    UNION ALL
    SELECT pg_describe_object('pg_statistic_ext'::regclass, s.oid, 0), s.stxexprs::text
    FROM pg_statistic_ext s
    WHERE s.stxexprs IS NOT NULL
      AND ((cls = 'pg_class'::regclass AND s.stxrelid = obj) OR (cls = 'pg_statistic_ext'::regclass AND s.oid = obj))
    UNION ALL
    SELECT pg_describe_object('pg_proc'::regclass, p.oid, 0), p.prosqlbody::text
    FROM pg_proc p WHERE p.prosqlbody IS NOT NULL AND cls = 'pg_proc'::regclass AND p.oid = obj
$tool$;
CREATE FUNCTION lookalike_tool.lookalike_tool_snapshot() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $tool$
BEGIN
    INSERT INTO lookalike_tool.snapshots (command, object, tree)
    SELECT current_query(), t.object, t.tree
    FROM pg_event_trigger_ddl_commands() c, lookalike_tool.lookalike_tool_trees_of(c.classid, c.objid) t;
END
$tool$;
CREATE EVENT TRIGGER lookalike_tool_snapshot ON ddl_command_end
    EXECUTE FUNCTION lookalike_tool.lookalike_tool_snapshot();
-- Makes the rows of the jobs it is given fail any update but a claim (see `exercise`).
CREATE FUNCTION lookalike_tool.lookalike_tool_refuse() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $tool$
BEGIN
    IF NEW.id::text = ANY (TG_ARGV) AND NEW.status::text <> 'running' THEN
        RAISE EXCEPTION 'this row cannot change';
    END IF;
    RETURN NEW;
END
$tool$;
"#;

/// Where a tree came from.
#[derive(Clone, Debug)]
enum Origin {
    /// A statement parsed through SPI (by the extension's code, or a PL/pgSQL function): its text,
    /// and what ran it (the error context's further lines).
    Statement { text: String, frames: String, backend: String },
    /// A statement of a SQL function's body.
    SqlFunction { name: String },
    /// A statement of an install or upgrade script, run by `command`.
    Script { command: String },
    /// An expression stored in the catalogs; `command` stored it, when an event trigger saw it.
    Stored { object: String, command: Option<String> },
}

struct Tree {
    db: String,
    origin: Origin,
    text: String,
}

/// One message of the server log, with the lines that belong to it.
#[derive(Default)]
struct Entry<'a> {
    /// The database; for the background worker, which the log line prefix cannot name, the one
    /// its process said it serves.
    db: &'a str,
    backend: &'a str,
    message: Vec<&'a str>,
    detail: Vec<&'a str>,
    context: Vec<&'a str>,
    statement: Vec<&'a str>,
}

/// Splits the server log (`log_line_prefix` of `settings`) into its messages. PostgreSQL writes
/// each message in one piece, its continuation lines starting with a tab.
fn log_entries(log: &str) -> Vec<Entry<'_>> {
    #[derive(Clone, Copy)]
    enum Part {
        Message,
        Detail,
        Context,
        Statement,
        Other,
    }
    let mut entries: Vec<Entry> = Vec::new();
    let mut part = Part::Other;
    // A reaper says which database it serves after its first statement; one that finds another
    // reaper serving it leaves without saying, and runs nothing but that statement, which calls
    // only pg_catalog's functions (the same in every database): it is read with fresh's catalogs.
    let served: HashMap<&str, &str> = log
        .lines()
        .filter_map(|line| {
            let (pid, rest) = line.strip_prefix('[')?.split_once(']')?;
            Some((pid, rest.split_once("LOG:  pg_jobqueue reaper started for database ")?.1))
        })
        .collect();
    for line in log.lines() {
        if let Some(more) = line.strip_prefix('\t') {
            if let Some(entry) = entries.last_mut() {
                match part {
                    Part::Message => entry.message.push(more),
                    Part::Detail => entry.detail.push(more),
                    Part::Context => entry.context.push(more),
                    Part::Statement => entry.statement.push(more),
                    Part::Other => {}
                }
            }
            continue;
        }
        let parsed = (|| {
            let rest = line.strip_prefix('[')?;
            let (pid, rest) = rest.split_once("] {")?;
            let (db, rest) = rest.split_once("} <")?;
            let (backend, rest) = rest.split_once("> ")?;
            let (level, text) = rest.split_once(":  ")?;
            Some((pid, db, backend, level, text))
        })();
        let Some((pid, mut db, backend, level, text)) = parsed else {
            part = Part::Other;
            continue;
        };
        if db.is_empty() {
            db = served.get(pid).copied().unwrap_or(if backend == "pg_jobqueue reaper" { "fresh" } else { "" });
        }
        let Some(entry) = entries.last_mut() else {
            entries.push(Entry { db, backend, message: vec![text], ..Entry::default() });
            part = Part::Message;
            continue;
        };
        match level {
            "DETAIL" => {
                part = Part::Detail;
                entry.detail.push(text);
            }
            "CONTEXT" => {
                part = Part::Context;
                entry.context.push(text);
            }
            "STATEMENT" => {
                part = Part::Statement;
                entry.statement.push(text);
            }
            "HINT" | "QUERY" | "LOCATION" => part = Part::Other,
            _ => {
                entries.push(Entry { db, backend, message: vec![text], ..Entry::default() });
                part = Part::Message;
            }
        }
    }
    entries
}

/// The lines of a node dump as one string: `elog_node_display` breaks it into lines of at most 78
/// characters, at a space it drops, or inside a token when a line has no space.
fn join_dump(lines: &[&str]) -> String {
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            let previous = lines[i - 1];
            let broken_inside_a_token = previous.len() == 78 && !previous[1..].contains(' ');
            if !broken_inside_a_token {
                out.push(' ');
            }
        }
        out.push_str(line);
    }
    out
}

/// The parse trees the log holds of the extension's statements, each once per database, and the
/// text of every statement parsed through SPI (for `Sources::uncovered`). A tree without an error
/// context is this test's own statement, unless it is one of an extension script's, whose only
/// context is the `CREATE EXTENSION` or `ALTER EXTENSION` that runs it.
fn logged_trees(log: &str) -> (Vec<Tree>, BTreeSet<String>) {
    let mut seen = HashSet::new();
    let mut trees = Vec::new();
    let mut statements = BTreeSet::new();
    for entry in log_entries(log) {
        if entry.message.first() != Some(&"rewritten parse tree:") || entry.detail.is_empty() {
            continue;
        }
        let context = entry.context.join("\n");
        let statement = entry.statement.join("\n");
        if context.contains("lookalike_tool_") {
            continue;
        }
        let origin = if context.is_empty() {
            let lower = statement.to_lowercase();
            if !(lower.starts_with("create extension pg_jobqueue") || lower.starts_with("alter extension pg_jobqueue"))
            {
                continue;
            }
            Origin::Script { command: statement }
        } else if let Some(body) =
            context.strip_prefix("SQL statement \"").or_else(|| context.strip_prefix("SQL expression \""))
        {
            let (text, frames) = innermost(body);
            statements.insert(text.clone());
            Origin::Statement { text, frames, backend: entry.backend.to_owned() }
        } else if let Some(rest) = context.strip_prefix("SQL function \"") {
            Origin::SqlFunction { name: rest.split('"').next().unwrap_or_default().to_owned() }
        } else {
            Origin::Statement { text: String::new(), frames: context, backend: entry.backend.to_owned() }
        };
        let text = join_dump(&entry.detail);
        if seen.insert((entry.db.to_owned(), text.clone())) {
            trees.push(Tree { db: entry.db.to_owned(), origin, text });
        }
    }
    (trees, statements)
}

/// The statement of an error context that starts with it (after its opening quote), and the
/// context's further lines.
fn innermost(body: &str) -> (String, String) {
    const FRAMES: [&str; 5] = [
        "\nPL/pgSQL function ",
        "\nSQL statement \"",
        "\nSQL expression \"",
        "\nSQL function \"",
        "\nextension script",
    ];
    let end = body
        .match_indices('"')
        .map(|(i, _)| i)
        .find(|&i| FRAMES.iter().any(|frame| body[i + 1..].starts_with(frame)))
        .or_else(|| body.rfind('"'))
        .unwrap_or(body.len());
    (body[..end].to_owned(), body.get(end + 1..).unwrap_or_default().trim().to_owned())
}

/// The expressions stored for the extension's objects: those the event trigger kept during every
/// DDL command, and those of every member of the extension (and partition of a member table) now.
fn stored_trees(cluster: &Cluster, databases: &[String]) -> Vec<Tree> {
    stored(cluster, databases, true)
}

/// The expressions stored for the extension's objects now, and (`with_kept`) those the event
/// trigger kept, each once, with the DDL command that stored it where the trigger saw it.
fn stored(cluster: &Cluster, databases: &[String], with_kept: bool) -> Vec<Tree> {
    let mut trees = Vec::new();
    for db in databases {
        let mut client = inspector(cluster, db);
        let mut seen = HashSet::new();
        let now = client
            .query(
                "WITH RECURSIVE objects (classid, objid) AS (
                     SELECT d.classid, d.objid
                     FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'pg_jobqueue'
                     UNION
                     SELECT 'pg_class'::regclass::oid, i.inhrelid
                     FROM objects o JOIN pg_inherits i ON i.inhparent = o.objid
                     WHERE o.classid = 'pg_class'::regclass
                 )
                 SELECT t.object, t.tree, NULL::text FROM objects o, lookalike_tool.lookalike_tool_trees_of(o.classid, o.objid) t",
                &[],
            )
            .unwrap();
        let kept = match with_kept {
            true => client.query("SELECT object, tree, command FROM lookalike_tool.snapshots", &[]).unwrap(),
            false => Vec::new(),
        };
        for row in kept.iter().chain(&now) {
            let (object, text, command): (String, String, Option<String>) = (row.get(0), row.get(1), row.get(2));
            if seen.insert(text.clone()) {
                trees.push(Tree { db: db.clone(), origin: Origin::Stored { object, command }, text });
            }
        }
    }
    trees
}

// ---------------------------------------------------------------------------------------------
// Node trees (PostgreSQL's nodeToString format)
// ---------------------------------------------------------------------------------------------

/// A node: `{TAG :field value ...}`, a list `( ... )`, a token, or `<>` (NULL).
#[derive(Debug)]
enum Node {
    Object(String, Vec<(String, Vec<Node>)>),
    List(Vec<Node>),
    Token(String),
    Null,
}

enum Token {
    Open(char),
    Close,
    Word(String),
    Null,
}

/// `pg_strtok`'s rules: whitespace separates tokens, `(){}` are tokens of their own, a backslash
/// makes the next character a plain one, and an unescaped `<>` is NULL.
fn tokens(text: &str) -> Vec<Token> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                chars.next();
            }
            '{' | '(' => {
                chars.next();
                out.push(Token::Open(c));
            }
            '}' | ')' => {
                chars.next();
                out.push(Token::Close);
            }
            _ => {
                let mut word = String::new();
                let mut escaped = false;
                while let Some(&c) = chars.peek() {
                    if matches!(c, ' ' | '\t' | '\n' | '\r' | '{' | '}' | '(' | ')') {
                        break;
                    }
                    chars.next();
                    if c == '\\' {
                        if let Some(next) = chars.next() {
                            word.push(next);
                            escaped = true;
                        }
                    } else {
                        word.push(c);
                    }
                }
                out.push(if word == "<>" && !escaped { Token::Null } else { Token::Word(word) });
            }
        }
    }
    out
}

fn parse(text: &str) -> Node {
    let mut tokens = tokens(text).into_iter().peekable();
    node(&mut tokens)
}

fn node(tokens: &mut std::iter::Peekable<std::vec::IntoIter<Token>>) -> Node {
    match tokens.next() {
        Some(Token::Open('{')) => {
            let tag = match tokens.next() {
                Some(Token::Word(tag)) => tag,
                _ => String::new(),
            };
            let mut fields = Vec::new();
            loop {
                match tokens.peek() {
                    None => break,
                    Some(Token::Close) => {
                        tokens.next();
                        break;
                    }
                    Some(Token::Word(w)) if w.starts_with(':') => {
                        let name = w[1..].to_owned();
                        tokens.next();
                        let mut values = Vec::new();
                        while !matches!(tokens.peek(), None | Some(Token::Close))
                            && !matches!(tokens.peek(), Some(Token::Word(w)) if w.starts_with(':'))
                        {
                            values.push(node(tokens));
                        }
                        fields.push((name, values));
                    }
                    Some(_) => {
                        node(tokens);
                    }
                }
            }
            Node::Object(tag, fields)
        }
        Some(Token::Open(_)) => {
            let mut items = Vec::new();
            while !matches!(tokens.peek(), None | Some(Token::Close)) {
                items.push(node(tokens));
            }
            tokens.next();
            Node::List(items)
        }
        Some(Token::Word(word)) => Node::Token(word),
        Some(Token::Null) | Some(Token::Close) | None => Node::Null,
    }
}

impl Node {
    fn tag(&self) -> &str {
        match self {
            Node::Object(tag, _) => tag,
            _ => "",
        }
    }

    fn get(&self, name: &str) -> Option<&Node> {
        match self {
            Node::Object(_, fields) => fields.iter().find(|(n, _)| n == name).and_then(|(_, v)| v.first()),
            _ => None,
        }
    }

    fn word(&self, name: &str) -> Option<&str> {
        match self.get(name)? {
            Node::Token(word) => Some(word),
            _ => None,
        }
    }

    fn int(&self, name: &str) -> Option<i64> {
        self.word(name)?.parse().ok()
    }

    fn oid(&self, name: &str) -> u32 {
        self.int(name).and_then(|n| u32::try_from(n).ok()).unwrap_or(0)
    }

    /// The items of a list field (without the `i`/`o`/`b` marker of an integer, OID or bitmap list).
    fn items(&self, name: &str) -> &[Node] {
        match self.get(name) {
            Some(Node::List(items)) => match items.first() {
                Some(Node::Token(marker)) if ["i", "o", "b"].contains(&marker.as_str()) => &items[1..],
                _ => items,
            },
            _ => &[],
        }
    }

    fn walk<'a>(&'a self, visit: &mut impl FnMut(&'a Node)) {
        visit(self);
        match self {
            Node::Object(_, fields) => fields.iter().flat_map(|(_, values)| values).for_each(|n| n.walk(visit)),
            Node::List(items) => items.iter().for_each(|n| n.walk(visit)),
            _ => {}
        }
    }

    /// The smallest parse location in this subtree, for a node that has none of its own.
    fn location(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        self.walk(&mut |n| {
            if let Some(at) = n.int("location").and_then(|l| usize::try_from(l).ok()) {
                best = Some(best.map_or(at, |b| b.min(at)));
            }
        });
        best
    }
}

// ---------------------------------------------------------------------------------------------
// Calls and their argument types
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallKind {
    Operator,
    Function,
    Aggregate,
    Window,
}

struct Arg {
    /// The type at the call site, implicit casts taken off; None if this test cannot tell.
    ty: Option<u32>,
    /// A constant, which may have been an untyped literal in the source.
    constant: bool,
    /// The parameter name, for an argument passed by name.
    name: Option<String>,
    tag: String,
}

struct Call {
    kind: CallKind,
    oid: u32,
    args: Vec<Arg>,
    result: u32,
    retset: bool,
    /// Whether a variadic function's variadic arguments are listed one by one (not passed as one
    /// array with VARIADIC).
    spread: bool,
    location: Option<usize>,
}

/// Every call in a tree whose target was found by name: operators, functions called as such (not
/// casts, and not SQL syntax such as EXTRACT, which the parser looks up in pg_catalog), aggregates
/// and window functions.
fn calls(root: &Node, catalog: &Catalog) -> Vec<Call> {
    let mut out = Vec::new();
    root.walk(&mut |n| {
        let location = n.int("location").and_then(|l| usize::try_from(l).ok()).or_else(|| n.location());
        let plain = |kind, oid, args: Vec<Arg>, result| Call {
            kind,
            oid,
            args,
            result,
            retset: false,
            spread: false,
            location,
        };
        match n.tag() {
            "OPEXPR" | "DISTINCTEXPR" | "NULLIFEXPR" => {
                let result = if n.tag() == "DISTINCTEXPR" { BOOL } else { n.oid("opresulttype") };
                out.push(plain(CallKind::Operator, n.oid("opno"), args(n.items("args"), catalog), result));
            }
            "SCALARARRAYOPEXPR" => {
                let items = n.items("args");
                if let [scalar, array] = items {
                    let mut element = arg(array, catalog);
                    element.ty = element.ty.map(|t| catalog.types.get(&t).map_or(0, |t| t.elem));
                    let stripped = strip(array);
                    element.constant = stripped.tag() == "CONST"
                        || (is_array(stripped) && stripped.items("elements").iter().all(|e| strip(e).tag() == "CONST"));
                    out.push(plain(CallKind::Operator, n.oid("opno"), vec![arg(scalar, catalog), element], BOOL));
                }
            }
            "ROWCOMPARE" | "ROWCOMPAREEXPR" => {
                let opnos: Vec<u32> = n
                    .items("opnos")
                    .iter()
                    .filter_map(|o| if let Node::Token(t) = o { t.parse().ok() } else { None })
                    .collect();
                for (i, opno) in opnos.into_iter().enumerate() {
                    if let (Some(l), Some(r)) = (n.items("largs").get(i), n.items("rargs").get(i)) {
                        out.push(plain(CallKind::Operator, opno, vec![arg(l, catalog), arg(r, catalog)], BOOL));
                    }
                }
            }
            "FUNCEXPR" if n.int("funcformat") == Some(0) => {
                let funcid = n.oid("funcid");
                let explicit_variadic = n.word("funcvariadic") == Some("true");
                let mut list = args(n.items("args"), catalog);
                let variadic = catalog.functions.get(&funcid).map_or(0, |f| f.variadic);
                if !explicit_variadic && variadic != 0 && variadic != ANY {
                    // The parser gathered the variadic arguments into an array: each is an argument.
                    if let Some(last) = n.items("args").last().map(strip).filter(|l| is_array(l)) {
                        list.pop();
                        list.extend(args(last.items("elements"), catalog));
                    }
                }
                out.push(Call {
                    kind: CallKind::Function,
                    oid: funcid,
                    args: list,
                    result: n.oid("funcresulttype"),
                    retset: n.word("funcretset") == Some("true"),
                    spread: !explicit_variadic,
                    location,
                });
            }
            "AGGREF" => {
                let mut list = args(n.items("aggdirectargs"), catalog);
                for entry in n.items("args") {
                    list.push(entry.get("expr").map_or_else(|| untyped("TARGETENTRY"), |e| arg(e, catalog)));
                }
                out.push(plain(CallKind::Aggregate, n.oid("aggfnoid"), list, n.oid("aggtype")));
            }
            "WINDOWFUNC" => {
                out.push(plain(CallKind::Window, n.oid("winfnoid"), args(n.items("args"), catalog), n.oid("wintype")));
            }
            _ => {}
        }
    });
    out
}

fn is_array(n: &Node) -> bool {
    matches!(n.tag(), "ARRAYEXPR" | "ARRAY")
}

fn untyped(tag: &str) -> Arg {
    Arg { ty: None, constant: false, name: None, tag: tag.to_owned() }
}

fn args(items: &[Node], catalog: &Catalog) -> Vec<Arg> {
    items.iter().map(|a| arg(a, catalog)).collect()
}

fn arg(n: &Node, catalog: &Catalog) -> Arg {
    let (name, n) = match n.tag() {
        "NAMEDARGEXPR" => (n.word("name").map(str::to_owned), n.get("arg").unwrap_or(n)),
        _ => (None, n),
    };
    let n = strip(n);
    Arg { ty: type_of(n, catalog), constant: n.tag() == "CONST", name, tag: n.tag().to_owned() }
}

/// The expression under the implicit casts the parser added to make a call match.
fn strip(n: &Node) -> &Node {
    const IMPLICIT: i64 = 2;
    let format = match n.tag() {
        "RELABELTYPE" => n.int("relabelformat"),
        "COERCEVIAIO" | "ARRAYCOERCEEXPR" => n.int("coerceformat"),
        "COERCETODOMAIN" => n.int("coercionformat"),
        "CONVERTROWTYPEEXPR" => n.int("convertformat"),
        "FUNCEXPR" => n.int("funcformat"),
        _ => None,
    };
    if format != Some(IMPLICIT) {
        return n;
    }
    let inner = if n.tag() == "FUNCEXPR" { n.items("args").first() } else { n.get("arg") };
    inner.map_or(n, strip)
}

/// The type of an expression node.
fn type_of(n: &Node, catalog: &Catalog) -> Option<u32> {
    let field = match n.tag() {
        "VAR" => "vartype",
        "CONST" => "consttype",
        "PARAM" => "paramtype",
        "FUNCEXPR" => "funcresulttype",
        "OPEXPR" | "NULLIFEXPR" => "opresulttype",
        "AGGREF" => "aggtype",
        "WINDOWFUNC" => "wintype",
        "CASEEXPR" | "CASE" => "casetype",
        "COALESCEEXPR" | "COALESCE" => "coalescetype",
        "ARRAYEXPR" | "ARRAY" => "array_typeid",
        "ROWEXPR" | "ROW" => "row_typeid",
        "MINMAXEXPR" | "MINMAX" => "minmaxtype",
        "SQLVALUEFUNCTION" | "XMLEXPR" => "type",
        "CASETESTEXPR" | "COERCETODOMAINVALUE" | "SETTODEFAULT" | "NEXTVALUEEXPR" => "typeId",
        "RELABELTYPE" | "COERCEVIAIO" | "ARRAYCOERCEEXPR" | "COERCETODOMAIN" | "CONVERTROWTYPEEXPR" | "FIELDSELECT"
        | "FIELDSTORE" => "resulttype",
        "SUBSCRIPTINGREF" => "refrestype",
        "DISTINCTEXPR" | "SCALARARRAYOPEXPR" | "ROWCOMPARE" | "ROWCOMPAREEXPR" | "BOOLEXPR" | "NULLTEST"
        | "BOOLEANTEST" | "CURRENTOFEXPR" => return Some(BOOL),
        "GROUPINGFUNC" => return Some(23),
        "COLLATEEXPR" | "NAMEDARGEXPR" => return type_of(strip(n.get("arg")?), catalog),
        "SUBLINK" => {
            const EXPR: i64 = 4;
            const ARRAY: i64 = 6;
            let kind = n.int("subLinkType")?;
            if kind != EXPR && kind != ARRAY {
                return Some(BOOL);
            }
            let select = n.get("subselect")?;
            let first = select.items("targetList").iter().find(|t| t.word("resjunk") != Some("true"))?;
            let ty = type_of(first.get("expr")?, catalog)?;
            return if kind == ARRAY { catalog.types.get(&ty).map(|t| t.array) } else { Some(ty) };
        }
        _ => return None,
    };
    Some(n.oid(field)).filter(|&t| t != 0)
}

// ---------------------------------------------------------------------------------------------
// Catalogs
// ---------------------------------------------------------------------------------------------

struct Type {
    name: String,
    elem: u32,
    array: u32,
    pseudo: bool,
}

struct Operator {
    name: String,
    schema: String,
    left: u32,
    right: u32,
    owner: String,
    /// The function that computes it.
    code: u32,
}

struct Function {
    name: String,
    schema: String,
    args: Vec<u32>,
    /// The names of the parameters (of every mode), and how many have defaults.
    arg_names: Vec<String>,
    defaults: usize,
    variadic: u32,
    outs: Vec<(String, u32)>,
    owner: String,
    member: bool,
    source: Option<String>,
    /// IMMUTABLE, STABLE or VOLATILE.
    volatility: &'static str,
}

/// A database's types, operators and functions by OID: what the trees' OIDs stand for.
#[derive(Default)]
struct Catalog {
    types: HashMap<u32, Type>,
    operators: HashMap<u32, Operator>,
    functions: HashMap<u32, Function>,
}

#[derive(Default)]
struct Catalogs(HashMap<String, Catalog>);

impl Catalogs {
    /// Reads (again) the catalogs of `db`; what an upgrade dropped stays known.
    fn load(&mut self, cluster: &Cluster, db: &str) {
        let catalog = self.0.entry(db.to_owned()).or_default();
        let mut client = inspector(cluster, db);
        for row in client
            .query("SELECT oid, format_type(oid, NULL), typelem, typarray, typtype = 'p' FROM pg_type", &[])
            .unwrap()
        {
            catalog
                .types
                .insert(row.get(0), Type { name: row.get(1), elem: row.get(2), array: row.get(3), pseudo: row.get(4) });
        }
        for row in client
            .query(
                "SELECT o.oid, o.oprname::text, n.nspname::text, o.oprleft, o.oprright, pg_get_userbyid(o.oprowner)::text,
                        o.oprcode::oid
                 FROM pg_operator o JOIN pg_namespace n ON n.oid = o.oprnamespace",
                &[],
            )
            .unwrap()
        {
            catalog.operators.insert(
                row.get(0),
                Operator {
                    name: row.get(1),
                    schema: row.get(2),
                    left: row.get(3),
                    right: row.get(4),
                    owner: row.get(5),
                    code: row.get(6),
                },
            );
        }
        for row in client
            .query(
                "SELECT p.oid, p.proname::text, n.nspname::text, p.proargtypes::oid[], p.provariadic,
                        coalesce(p.proallargtypes, '{}'), coalesce(p.proargmodes::text[], '{}'),
                        coalesce(p.proargnames, '{}'), pg_get_userbyid(p.proowner)::text,
                        EXISTS (SELECT 1 FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                                WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
                                  AND e.extname = 'pg_jobqueue'),
                        CASE WHEN n.nspname <> 'pg_catalog' THEN p.prosrc END, p.pronargdefaults::int,
                        p.provolatile::text
                 FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace",
                &[],
            )
            .unwrap()
        {
            let (all, modes, names): (Vec<u32>, Vec<String>, Vec<String>) = (row.get(5), row.get(6), row.get(7));
            let outs = modes
                .iter()
                .enumerate()
                .filter(|(_, mode)| ["o", "t", "b"].contains(&mode.as_str()))
                .map(|(i, _)| (names.get(i).cloned().unwrap_or_else(|| format!("column{}", i + 1)), all[i]))
                .collect();
            catalog.functions.insert(
                row.get(0),
                Function {
                    name: row.get(1),
                    schema: row.get(2),
                    args: row.get(3),
                    arg_names: names.clone(),
                    defaults: usize::try_from(row.get::<_, i32>(11)).unwrap_or(0),
                    variadic: row.get(4),
                    outs,
                    owner: row.get(8),
                    member: row.get(9),
                    source: row.get(10),
                    volatility: match row.get::<_, String>(12).as_str() {
                        "i" => "IMMUTABLE",
                        "s" => "STABLE",
                        _ => "VOLATILE",
                    },
                },
            );
        }
    }
}

impl Catalog {
    fn type_name(&self, oid: u32) -> String {
        self.types.get(&oid).map_or_else(|| format!("type {oid}"), |t| t.name.clone())
    }

    fn type_names(&self, oids: &[u32]) -> Vec<String> {
        oids.iter().map(|&t| self.type_name(t)).collect()
    }

    /// What a call calls: (schema, name, owner, member of the extension, declared argument types
    /// for this many arguments, OUT parameters).
    fn target(&self, call: &Call) -> Option<Target<'_>> {
        if call.kind == CallKind::Operator {
            let op = self.operators.get(&call.oid)?;
            return Some(Target {
                schema: &op.schema,
                name: &op.name,
                owner: &op.owner,
                member: false,
                declared: [op.left, op.right].into_iter().filter(|&t| t != 0).collect(),
                outs: &[],
                volatility: self.functions.get(&op.code).map_or("VOLATILE", |f| f.volatility),
            });
        }
        let f = self.functions.get(&call.oid)?;
        let mut declared = f.args.clone();
        if f.variadic != 0 && call.spread && !declared.is_empty() {
            declared.pop();
            while declared.len() < call.args.len() {
                declared.push(f.variadic);
            }
        }
        Some(Target {
            schema: &f.schema,
            name: &f.name,
            owner: &f.owner,
            member: f.member,
            declared,
            outs: &f.outs,
            volatility: f.volatility,
        })
    }
}

struct Target<'c> {
    schema: &'c str,
    name: &'c str,
    owner: &'c str,
    member: bool,
    declared: Vec<u32>,
    outs: &'c [(String, u32)],
    volatility: &'static str,
}

// ---------------------------------------------------------------------------------------------
// Deriving the look-alikes
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Analysis {
    call_nodes: usize,
    distinct: BTreeSet<String>,
    exact: BTreeSet<String>,
    plants: BTreeMap<PlantKey, Plant>,
    unplantable: BTreeSet<String>,
    problems: Vec<String>,
}

fn analyse(trees: &[Tree], catalogs: &Catalogs) -> Analysis {
    let mut analysis = Analysis::default();
    for tree in trees {
        let Some(catalog) = catalogs.0.get(&tree.db) else {
            analysis.problems.push(format!(
                "a statement in database {:?}, whose catalogs were not read: {:?}",
                tree.db, tree.origin
            ));
            continue;
        };
        for call in calls(&parse(&tree.text), catalog) {
            analysis.call_nodes += 1;
            derive(&call, catalog, &mut analysis);
        }
    }
    analysis
}

/// Records a call, and the look-alikes that could capture it: one for each combination of its
/// argument types (a constant's own, or `text`) that is not exactly what pg_catalog's (or the
/// extension's) target declares.
fn derive(call: &Call, catalog: &Catalog, analysis: &mut Analysis) {
    let Some(target) = catalog.target(call) else {
        analysis.problems.push(format!("a {:?} call of OID {} not in the catalogs", call.kind, call.oid));
        return;
    };
    if let Some(a) = call.args.iter().find(|a| a.ty.is_none()) {
        analysis.problems.push(format!(
            "an argument ({}) of a call of {}.{} whose type is not known",
            a.tag, target.schema, target.name
        ));
        return;
    }
    let site: Vec<u32> = call.args.iter().map(|a| a.ty.unwrap_or(0)).collect();
    let home = target.schema == "pg_catalog" || target.member;
    let alternatives: Vec<Vec<u32>> = call
        .args
        .iter()
        .zip(&site)
        .map(|(a, &ty)| {
            let ty = if ty == UNKNOWN { TEXT } else { ty };
            if a.constant && ty != TEXT {
                vec![ty, TEXT]
            } else {
                vec![ty]
            }
        })
        .collect();
    let combinations = alternatives.iter().fold(vec![Vec::new()], |acc, choices| {
        acc.iter()
            .flat_map(|prefix| {
                choices.iter().map(move |&c| {
                    let mut next = prefix.clone();
                    next.push(c);
                    next
                })
            })
            .collect()
    });
    let description = format!(
        "{:?} {}.{}({}) called with ({})",
        call.kind,
        target.schema,
        target.name,
        catalog.type_names(&target.declared).join(", "),
        catalog.type_names(&site).join(", ")
    );
    analysis.distinct.insert(description.clone());
    if home && combinations.iter().all(|c| *c == target.declared) {
        analysis.exact.insert(description);
        return;
    }
    let kind = match call.kind {
        CallKind::Operator => PlantKind::Operator,
        CallKind::Function => PlantKind::Function,
        // A plain aggregate may be called as a window function too.
        CallKind::Aggregate | CallKind::Window => PlantKind::Aggregate,
    };
    let pseudo = |t: &u32| catalog.types.get(t).is_none_or(|t| t.pseudo) && *t != RECORD;
    for combination in combinations {
        if home && combination == target.declared {
            continue;
        }
        let key = PlantKey {
            kind,
            name: target.name.to_owned(),
            args: catalog.type_names(&combination),
            arg_names: call.args.iter().map(|a| a.name.clone()).collect(),
        };
        if combination.iter().any(pseudo) || (kind != PlantKind::Function && pseudo(&call.result)) {
            analysis.unplantable.insert(format!("{:?} {}({})", kind, key.name, key.args.join(", ")));
            continue;
        }
        let casts = (0..combination.len())
            .map(|i| {
                let declared = *target.declared.get(i).or(target.declared.last())?;
                (!catalog.types.get(&declared).is_none_or(|t| t.pseudo)).then(|| catalog.type_name(declared))
            })
            .collect();
        let result = if call.result == 0 { VOID } else { call.result };
        analysis.plants.entry(key.clone()).or_insert_with(|| Plant {
            key,
            result: catalog.type_name(result),
            retset: call.retset,
            outs: target.outs.iter().map(|(name, ty)| (name.clone(), catalog.type_name(*ty))).collect(),
            original: (target.schema.to_owned(), target.name.to_owned(), casts),
            volatility: target.volatility,
        });
    }
}

// ---------------------------------------------------------------------------------------------
// Round 2's findings
// ---------------------------------------------------------------------------------------------

/// Every call, in the logged statements and the stored expressions, of an operator or function
/// `attacker` owns: with what it calls and where the call is.
fn captured_calls(trees: &[Tree], catalogs: &Catalogs, sources: &Sources, attacker: &str) -> Vec<String> {
    let mut found = BTreeSet::new();
    for tree in trees {
        let Some(catalog) = catalogs.0.get(&tree.db) else { continue };
        for call in calls(&parse(&tree.text), catalog) {
            let Some(target) = catalog.target(&call) else { continue };
            // A look-alike's call of its own helper is no statement of the extension's.
            if target.owner != attacker || target.name.starts_with("lookalike_plant_") {
                continue;
            }
            let site: Vec<String> =
                call.args.iter().map(|a| a.ty.map_or_else(|| "?".to_owned(), |t| catalog.type_name(t))).collect();
            let what = match call.kind {
                CallKind::Operator => format!("operator {}({})", target.name, site.join(", ")),
                CallKind::Function => format!("function {}({})", target.name, site.join(", ")),
                CallKind::Aggregate | CallKind::Window => format!("aggregate {}({})", target.name, site.join(", ")),
            };
            found.insert(format!(
                "{what} in {}: {}",
                tree.db,
                sources.describe(tree, call.location, target.name, catalog)
            ));
        }
    }
    found.into_iter().collect()
}

/// The look-alikes of `attacker` that ran, each with the statement it ran in, how many times, and
/// a top-level statement that ran it.
fn look_alikes_that_ran(log: &str, attacker: &str) -> Vec<String> {
    let marker = format!("pg_jobqueue look-alike of {attacker}: ");
    let mut found: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for entry in log_entries(log) {
        let Some(what) = entry.message.first().and_then(|m| m.strip_prefix(&marker)) else { continue };
        // The look-alike's own frame first, then the statement that called it and what ran that.
        let context = entry.context.join("\n");
        let outer = context.split_once('\n').map_or("", |(_, outer)| outer);
        let within = match outer.strip_prefix("SQL statement \"").or_else(|| outer.strip_prefix("SQL expression \"")) {
            Some(body) => {
                let (text, frames) = innermost(body);
                let first =
                    text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("--")).unwrap_or_default();
                format!("statement `{first}` {}", frames.lines().next().unwrap_or_default())
            }
            None => match outer.lines().next() {
                Some(frame) => frame.to_owned(),
                None => "the statement itself".to_owned(),
            },
        };
        let db = if entry.db.is_empty() { "a database" } else { entry.db };
        let top = match entry.statement.join(" ") {
            top if top.is_empty() => format!("the {}", entry.backend),
            top => format!("`{}`", top.split_whitespace().collect::<Vec<_>>().join(" ")),
        };
        let (times, _) = found.entry(format!("{what} in {db}, within {within}")).or_insert((0, top));
        *times += 1;
    }
    found.into_iter().map(|(what, (times, top))| format!("{what}: {times} time(s), as in {top}")).collect()
}

// ---------------------------------------------------------------------------------------------
// The repository's SQL: coverage, and where a call is
// ---------------------------------------------------------------------------------------------

struct SqlFile {
    /// Relative to the repository.
    path: String,
    text: String,
    /// The file's SQL, comments out and whitespace collapsed, in pieces split where the code cuts
    /// sections out at run time (`-- name: begin` to `-- name: end`, `-- lean:` lines).
    pieces: Vec<String>,
}

struct Sources {
    root: PathBuf,
    /// sql/queries, parts included.
    queries: Vec<SqlFile>,
    /// The rest of sql/: the schema, the upgrade scripts and the frozen install scripts.
    others: Vec<SqlFile>,
    /// The released versions, oldest first, and every version.
    frozen: Vec<String>,
    versions: Vec<String>,
    /// Where the server reads the extension's scripts.
    extension_dir: PathBuf,
}

fn database_of(version: &str) -> String {
    format!("from_{}", version.replace('.', "_"))
}

fn version_key(version: &str) -> Vec<u32> {
    version.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

fn sql_files(root: &Path, dir: &Path, recursive: bool) -> Vec<SqlFile> {
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if recursive {
                files.extend(sql_files(root, &path, true));
            }
        } else if path.extension().is_some_and(|e| e == "sql") {
            let text = std::fs::read_to_string(&path).unwrap();
            let pieces = pieces(&text);
            let path = path.strip_prefix(root).unwrap_or(&path).display().to_string();
            files.push(SqlFile { path, text, pieces });
        }
    }
    files
}

/// SQL without its `--` comments (outside literals and quoted names), whitespace collapsed.
fn normalize(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '-' && chars.peek() == Some(&'-') => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
                out.push(' ');
            }
            None => {
                if c == '\'' || c == '"' {
                    quote = Some(c);
                }
                out.push(c);
            }
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether the statement `sql` (normalized) holds `piece` of a file. A name the code writes into
/// the text before running it (`$day` of history_day_depended_on.sql, a day's partition) stands
/// for any text there; `$1` and the like are parameters, which stay as written.
fn holds_piece(sql: &str, piece: &str) -> bool {
    let mut parts = vec![String::new()];
    let mut chars = piece.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_lowercase) {
            while chars.peek().is_some_and(|n| n.is_ascii_lowercase() || *n == '_') {
                chars.next();
            }
            parts.push(String::new());
        } else if let Some(part) = parts.last_mut() {
            part.push(c);
        }
    }
    let mut from = 0;
    for part in &parts {
        match sql[from..].find(part.as_str()) {
            Some(at) => from += at + part.len(),
            None => return false,
        }
    }
    true
}

fn pieces(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let t = line.trim();
        // Where src/api/claim/text.rs cuts or takes in text: sections, their replacements, and the
        // ordering-key check.
        let marker = t.starts_with("-- ")
            && (t.ends_with(": begin")
                || t.ends_with(": end")
                || t.starts_with("-- without ")
                || t == "-- ordering key check");
        if marker {
            pieces.push(normalize(&current));
            current.clear();
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    pieces.push(normalize(&current));
    pieces.retain(|p| !p.is_empty());
    pieces
}

impl Sources {
    fn read() -> Sources {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let root = root.canonicalize().unwrap_or(root);
        let queries = sql_files(&root, &root.join("sql/queries"), true);
        let mut others = sql_files(&root, &root.join("sql/schema"), false);
        others.extend(sql_files(&root, &root.join("sql"), false));
        others.extend(sql_files(&root, &root.join("sql/released"), false));
        let mut frozen: Vec<String> = others
            .iter()
            .filter_map(|f| f.path.strip_prefix("sql/released/pg_jobqueue--")?.strip_suffix(".sql").map(str::to_owned))
            .collect();
        frozen.sort_by_key(|v| version_key(v));
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
        let current = manifest
            .lines()
            .find_map(|l| l.strip_prefix("version = \"")?.strip_suffix('"').map(str::to_owned))
            .expect("the version in Cargo.toml");
        // The version built is the last frozen one once it is released.
        let mut versions = frozen.clone();
        if !versions.contains(&current) {
            versions.push(current);
        }
        Sources { root, queries, others, frozen, versions, extension_dir: PathBuf::new() }
    }

    fn databases(&self) -> Vec<String> {
        ["fresh", "dropped"].into_iter().map(str::to_owned).chain(self.frozen.iter().map(|v| database_of(v))).collect()
    }

    fn versions_after(&self, version: &str) -> Vec<String> {
        self.versions.iter().filter(|v| version_key(v) > version_key(version)).cloned().collect()
    }

    /// Each file of sql/queries with a piece that no statement parsed contains, with that piece.
    fn uncovered(&self, statements: &BTreeSet<String>) -> Vec<String> {
        let parsed: Vec<String> = statements.iter().map(|s| normalize(s)).collect();
        self.queries
            .iter()
            .filter_map(|file| {
                let missing = file.pieces.iter().find(|p| !parsed.iter().any(|s| holds_piece(s, p)))?;
                let start: String = missing.chars().take(120).collect();
                Some(format!("{}: never parsed: {start}…", file.path))
            })
            .chain(self.queries.iter().filter(|f| f.pieces.is_empty()).map(|f| format!("{}: no SQL in it", f.path)))
            .collect()
    }

    /// Where the call of `name` at `location` of `tree` is: the file and line when it is one of
    /// the repository's, and the line of SQL.
    fn describe(&self, tree: &Tree, location: Option<usize>, name: &str, catalog: &Catalog) -> String {
        match &tree.origin {
            Origin::Statement { text, frames, backend } => {
                let here = location.is_some_and(|at| written_at(text, at, name));
                let line = match location.filter(|_| here).and_then(|at| line_at(text, at)) {
                    Some((_, line)) => line.trim().to_owned(),
                    None => String::new(),
                };
                let normalized = normalize(text);
                let candidates: Vec<&SqlFile> =
                    self.queries.iter().filter(|f| f.pieces.iter().any(|p| holds_piece(&normalized, p))).collect();
                let mut place = find_line(&candidates, &line).or_else(|| self.find_anywhere(&line));
                if place.is_none() {
                    let first =
                        text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with("--")).unwrap_or_default();
                    place = Some(format!("statement `{first}`"));
                }
                let by = match frames.lines().next() {
                    Some(frame) if !frame.is_empty() => format!(" (in {frame})"),
                    _ if backend != "client backend" => format!(" (run by the {backend})"),
                    _ => String::new(),
                };
                if here {
                    format!("{}: `{line}`{by}", place.unwrap_or_default())
                } else {
                    format!("{}, in a column default or view it brings in{by}", place.unwrap_or_default())
                }
            }
            Origin::SqlFunction { name } => {
                let source = catalog
                    .functions
                    .values()
                    .find(|f| f.name == *name && f.schema != "pg_catalog")
                    .and_then(|f| f.source.as_deref());
                let line = source
                    .zip(location)
                    .and_then(|(s, at)| line_at(s, at))
                    .map(|(_, l)| l.trim().to_owned())
                    .unwrap_or_default();
                let place = self.find_anywhere(&line).unwrap_or_else(|| format!("SQL function {name}"));
                format!("{place}: `{line}` (SQL function {name})")
            }
            Origin::Script { command } => {
                let script = self.script_of(command);
                let text = script.as_ref().map(|(_, text)| text.as_str()).unwrap_or_default();
                let location = location.filter(|&at| written_at(text, at, name));
                match (location.and_then(|at| line_at(text, at)), &script) {
                    (Some((n, line)), Some((path, _))) => {
                        let line = line.trim();
                        let place = if path.starts_with("sql/") {
                            format!("{path}:{n}")
                        } else {
                            self.find_anywhere(line).unwrap_or_else(|| format!("{path}:{n}"))
                        };
                        format!("{place}: `{line}` (during {command})")
                    }
                    _ => format!("a statement of {command}, in a column default it brings in"),
                }
            }
            Origin::Stored { object, command } => match command {
                Some(command) => {
                    format!("{object} (stored by `{}`)", command.split_whitespace().collect::<Vec<_>>().join(" "))
                }
                None => object.clone(),
            },
        }
    }

    /// `file:line` of the only line of the repository's SQL that reads `line`.
    fn find_anywhere(&self, line: &str) -> Option<String> {
        let all: Vec<&SqlFile> = self.queries.iter().chain(&self.others).collect();
        let hits: Vec<String> = all
            .iter()
            .flat_map(|f| {
                f.text
                    .lines()
                    .enumerate()
                    .filter(|(_, l)| l.trim() == line)
                    .map(move |(i, _)| format!("{}:{}", f.path, i + 1))
            })
            .collect();
        (hits.len() == 1 && !line.is_empty()).then(|| hits[0].clone())
    }

    /// The script an extension command ran (its repository path, or the generated file's name), as
    /// the server read it: `\echo` lines emptied, `@extschema@` and `MODULE_PATHNAME` replaced.
    fn script_of(&self, command: &str) -> Option<(String, String)> {
        let quoted: Vec<&str> = command.split('\'').collect();
        let lower = command.to_lowercase();
        let (file, repo) = if lower.starts_with("create extension") {
            let version = quoted.get(1).copied().unwrap_or_else(|| self.versions.last().unwrap());
            let repo = format!("sql/released/pg_jobqueue--{version}.sql");
            (format!("pg_jobqueue--{version}.sql"), repo)
        } else {
            let to = quoted.get(1)?;
            let from = self.versions.iter().rev().find(|v| version_key(v) < version_key(to))?;
            let name = format!("pg_jobqueue--{from}--{to}.sql");
            (name.clone(), format!("sql/{name}"))
        };
        let (path, text) = match std::fs::read_to_string(self.root.join(&repo)) {
            Ok(text) => (repo, text),
            Err(_) => (file.clone(), std::fs::read_to_string(self.extension_dir.join(&file)).ok()?),
        };
        let text: String = text
            .split_inclusive('\n')
            .map(|l| {
                if l.starts_with("\\echo") {
                    if l.ends_with('\n') {
                        "\n"
                    } else {
                        ""
                    }
                } else {
                    l
                }
            })
            .collect();
        Some((path, text.replace("@extschema@", "public").replace("MODULE_PATHNAME", "$libdir/pg_jobqueue")))
    }
}

/// Whether the call of `name` at byte `at` was written in `text`. A call the rewriter brought in
/// (the default of a column a statement fills in, a view it reads) has its location in the text
/// that defined it.
fn written_at(text: &str, at: usize, name: &str) -> bool {
    text.get(at..).is_some_and(|rest| {
        let rest = rest.trim_start_matches('"').to_lowercase();
        rest.starts_with(name) || rest.starts_with("pg_catalog.") || rest.starts_with("operator(")
    })
}

fn find_line(files: &[&SqlFile], line: &str) -> Option<String> {
    if line.is_empty() {
        return None;
    }
    files.iter().find_map(|f| {
        let n = f.text.lines().position(|l| l.trim() == line)?;
        Some(format!("{}:{}", f.path, n + 1))
    })
}

/// The line (1-based) holding byte `at` of `text`, and its text.
fn line_at(text: &str, at: usize) -> Option<(usize, &str)> {
    let before = text.get(..at)?;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    Some((before.matches('\n').count() + 1, &text[start..end]))
}
