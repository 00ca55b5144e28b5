//! Safe to deploy (guide, "Security"): nothing another role creates runs inside a jq_* function or
//! the reaper, rights are per queue, and nothing one job, setting or role does stops the queue.

use jq_harness::client::{connect_as, sqlstate};
use jq_harness::{text_rows, wait_until, Client, Cluster};

const PRELOADED: [&str; 3] = [
    "shared_preload_libraries = 'pg_jobqueue'",
    "pg_jobqueue.reaper_databases = 'postgres, hijack, poison, other'",
    "pg_jobqueue.reaper_interval = 100",
];

/// Look-alike operators and functions for every type and function the extension's queries use:
/// each one logs that it ran and tries to make its creator a superuser, then does what the real
/// one does, so that a query that picked it would go on and commit the log.
const HOOKS: &str = r#"
CREATE TABLE public.hook_log (hook text, by_role text DEFAULT current_user);
GRANT INSERT ON public.hook_log TO PUBLIC;
CREATE FUNCTION public.hook(name text) RETURNS void LANGUAGE plpgsql AS $h$
BEGIN
    INSERT INTO public.hook_log (hook) VALUES (name);
    BEGIN
        EXECUTE pg_catalog.format('ALTER ROLE %I SUPERUSER', 'CREATOR');
    EXCEPTION WHEN insufficient_privilege THEN NULL;
    END;
END $h$;
CREATE FUNCTION public.h_status_eq(jq_status, jq_status) RETURNS boolean LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('=(jq_status)'); RETURN $1::text = $2::text; END $h$;
CREATE FUNCTION public.h_status_text_eq(jq_status, text) RETURNS boolean LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('=(jq_status,text)'); RETURN $1::text = $2; END $h$;
CREATE OPERATOR public.= (LEFTARG = jq_status, RIGHTARG = text, FUNCTION = public.h_status_text_eq);
CREATE FUNCTION public.h_ts_le(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('<=(timestamptz)'); RETURN $1 OPERATOR(pg_catalog.<=) $2; END $h$;
CREATE OPERATOR public.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.h_ts_le);
CREATE FUNCTION public.h_ts_gt(timestamptz, timestamptz) RETURNS boolean LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('>(timestamptz)'); RETURN $1 OPERATOR(pg_catalog.>) $2; END $h$;
CREATE OPERATOR public.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = public.h_ts_gt);
CREATE FUNCTION public.h_ts_plus(timestamptz, interval) RETURNS timestamptz LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('+(timestamptz,interval)'); RETURN $1 OPERATOR(pg_catalog.+) $2; END $h$;
CREATE OPERATOR public.+ (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.h_ts_plus);
CREATE FUNCTION public.h_ts_minus(timestamptz, interval) RETURNS timestamptz LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('-(timestamptz,interval)'); RETURN $1 OPERATOR(pg_catalog.-) $2; END $h$;
CREATE OPERATOR public.- (LEFTARG = timestamptz, RIGHTARG = interval, FUNCTION = public.h_ts_minus);
CREATE FUNCTION public.h_iv_times(interval, double precision) RETURNS interval LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('*(interval,float8)'); RETURN $1 OPERATOR(pg_catalog.*) $2; END $h$;
CREATE OPERATOR public.* (LEFTARG = interval, RIGHTARG = double precision, FUNCTION = public.h_iv_times);
CREATE FUNCTION public.h_f_times_n(double precision, numeric) RETURNS double precision LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('*(float8,numeric)'); RETURN $1 OPERATOR(pg_catalog.*) $2::float8; END $h$;
CREATE OPERATOR public.* (LEFTARG = double precision, RIGHTARG = numeric, FUNCTION = public.h_f_times_n);
CREATE FUNCTION public.h_n_times_i(numeric, integer) RETURNS numeric LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('*(numeric,int)'); RETURN $1 OPERATOR(pg_catalog.*) $2::numeric; END $h$;
CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.h_n_times_i);
CREATE FUNCTION public.h_text_eq(text, text) RETURNS boolean LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('=(text)'); RETURN $1 OPERATOR(pg_catalog.=) $2; END $h$;
CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = text, FUNCTION = public.h_text_eq);
CREATE FUNCTION public.h_name_cat(name, text) RETURNS text LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('||(name,text)'); RETURN $1::text OPERATOR(pg_catalog.||) $2; END $h$;
CREATE OPERATOR public.|| (LEFTARG = name, RIGHTARG = text, FUNCTION = public.h_name_cat);
CREATE FUNCTION public.h_int8_plus(bigint, integer) RETURNS bigint LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('+(bigint,int)'); RETURN $1 OPERATOR(pg_catalog.+) $2; END $h$;
CREATE OPERATOR public.+ (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = public.h_int8_plus);
CREATE FUNCTION public.h_int_lt(integer, integer) RETURNS boolean LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('<(int)'); RETURN $1 OPERATOR(pg_catalog.<) $2; END $h$;
CREATE OPERATOR public.< (LEFTARG = integer, RIGHTARG = integer, FUNCTION = public.h_int_lt);
CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('now'); RETURN pg_catalog.now(); END $h$;
CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('clock_timestamp'); RETURN pg_catalog.clock_timestamp(); END $h$;
CREATE FUNCTION public.random() RETURNS double precision LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('random'); RETURN pg_catalog.random(); END $h$;
CREATE FUNCTION public.power(integer, integer) RETURNS double precision LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('power'); RETURN pg_catalog.power($1::float8, $2::float8); END $h$;
CREATE FUNCTION public.pg_has_role(oid, regrole, text) RETURNS boolean LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('pg_has_role'); RETURN pg_catalog.pg_has_role($1, $2::oid, $3); END $h$;
CREATE FUNCTION public.starts_with(text, text) RETURNS boolean LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('starts_with'); RETURN true; END $h$;
CREATE FUNCTION public.unnest(bigint[], bigint[]) RETURNS TABLE (a bigint, b bigint) LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('unnest'); RETURN QUERY SELECT * FROM pg_catalog.unnest($1, $2); END $h$;
CREATE FUNCTION public.quote_ident(name) RETURNS text LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('quote_ident'); RETURN pg_catalog.quote_ident($1::text); END $h$;
CREATE FUNCTION public.format(text, regprocedure) RETURNS text LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('format'); RETURN pg_catalog.format($1, $2); END $h$;
CREATE FUNCTION public.h_min_step(timestamptz, timestamptz) RETURNS timestamptz LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('min'); RETURN least($1, $2); END $h$;
CREATE AGGREGATE public.min(timestamptz) (SFUNC = public.h_min_step, STYPE = timestamptz);
CREATE FUNCTION public.h_count_step(bigint) RETURNS bigint LANGUAGE plpgsql AS $h$ BEGIN PERFORM public.hook('count'); RETURN $1 OPERATOR(pg_catalog.+) 1; END $h$;
CREATE AGGREGATE public.count(*) (SFUNC = public.h_count_step, STYPE = bigint, INITCOND = '0');
"#;

/// Calls every function and view as `client` (the caller under test), with jobs to act on.
fn call_everything(client: &mut Client) {
    client
        .batch_execute(
            "SELECT jq_enqueue('mail', '{}', dedup_key => 'k', ordering_key => 'o');
             SELECT jq_enqueue_batch('mail', ARRAY['{}'::jsonb, '{}']);
             SELECT jq_configure('mail', '{\"backoff_base\": \"1 hour\", \"max_attempts\": 50}');
             SELECT jq_grant('pg_monitor', 'mail', 'monitor');
             SELECT jq_revoke('pg_monitor', 'mail', 'monitor');
             SELECT jq_has_right('mail', 'consume');",
        )
        .unwrap();
    let claimed = client.query("SELECT id, lease_token FROM jq_claim('mail', 'w', batch_size => 3)", &[]).unwrap();
    let (ids, tokens): (Vec<i64>, Vec<i64>) = claimed.iter().map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1))).unzip();
    client.query("SELECT jq_heartbeat($1, 'w', $2)", &[&ids[0], &tokens[0]]).unwrap();
    client.query("SELECT jq_fail($1, 'w', $2, 'E', retryable => false)", &[&ids[0], &tokens[0]]).unwrap();
    client.query("SELECT jq_complete($1, 'w', $2)", &[&ids[1], &tokens[1]]).unwrap();
    client
        .query("SELECT * FROM jq_complete_batch(ARRAY[$1::bigint], 'w', ARRAY[$2::bigint])", &[&ids[2], &tokens[2]])
        .unwrap();
    client.query("SELECT jq_retry($1)", &[&ids[0]]).unwrap();
    client.query("SELECT jq_cancel($1)", &[&ids[0]]).unwrap();
    client
        .batch_execute(
            "SELECT jq_retry_dead('mail'); SELECT jq_purge_dead('mail'); SELECT jq_prune(); SELECT jq_reap();
             SELECT * FROM jq_queue_stats; SELECT * FROM jq_queue_health; SELECT jq_metrics();
             SELECT * FROM jq_queue_counters(); SELECT * FROM jq_failure_counts(); SELECT jq_stats_reset();
             SELECT jq_backoff('mail', 40);",
        )
        .unwrap();
    // A waiting claim that sleeps once (nothing is claimable: the queue is paused).
    client.batch_execute("SELECT jq_configure('mail', '{\"paused\": true}')").unwrap();
    client.query("SELECT * FROM jq_claim('mail', 'w', wait => '50 ms')", &[]).unwrap();
    client.batch_execute("SELECT jq_configure('mail', '{\"paused\": false}')").unwrap();
}

/// `creator` plants the hooks in `public` (where the extension is), then the reaper, a superuser
/// and a monitoring role use the queue. No hook runs and the creator gains nothing.
fn no_hook_runs(cluster: &Cluster, database: &str, creator: &str) {
    let mut creator_client = connect_as(cluster, database, creator);
    creator_client.batch_execute(&HOOKS.replace("CREATOR", creator)).unwrap();
    // The exact operator on the extension's own type is taken, in the extension's schema.
    assert_eq!(
        sqlstate(
            &mut creator_client,
            "CREATE OPERATOR public.= (LEFTARG = jq_status, RIGHTARG = jq_status, FUNCTION = public.h_status_eq)"
        )
        .as_deref(),
        Some("42723"),
        "{creator} planted =(jq_status, jq_status) beside the extension"
    );

    let mut admin = connect_as(cluster, database, "postgres");
    call_everything(&mut admin);
    // The reaper: an expired lease with a long backoff, reaped by the background worker.
    admin.batch_execute("SELECT jq_enqueue('mail', '{}')").unwrap();
    let id: i64 = admin.query_one("SELECT id FROM jq_claim('mail', 'w', '100 ms')", &[]).unwrap().get(0);
    wait_until("the reaper reaped the lease", || {
        admin.query_one("SELECT status::text FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get::<_, String>(0)
            == "pending"
    });
    let mut monitor = connect_as(cluster, database, "watcher");
    monitor.batch_execute("SELECT * FROM jq_queue_stats; SELECT * FROM jq_queue_health; SELECT jq_metrics()").unwrap();

    let ran: Vec<String> = admin
        .query("SELECT hook || ' as ' || by_role FROM public.hook_log", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(ran.is_empty(), "hooks ran inside pg_jobqueue: {ran:?}");
    let superuser: bool =
        admin.query_one("SELECT rolsuper FROM pg_roles WHERE rolname = $1", &[&creator]).unwrap().get(0);
    assert!(!superuser, "{creator} became a superuser");
    // The hooks are live: a query that puts `public` before pg_catalog picks the look-alike of
    // =(text, text).
    admin
        .batch_execute("SET search_path = public, pg_catalog; SELECT count(*) FROM jq_jobs WHERE queue_name = 'mail'")
        .unwrap();
    let caught: i64 = admin.query_one("SELECT count(*) FROM public.hook_log", &[]).unwrap().get(0);
    assert!(caught > 0, "the look-alike operators would not have been picked by anything");
    admin.batch_execute(&format!("ALTER ROLE {creator} NOSUPERUSER; RESET search_path")).unwrap();
}

#[test]
fn look_alike_operators_and_functions_never_run_inside_the_queue() {
    let cluster = Cluster::start_with(&PRELOADED);
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE ROLE dbowner LOGIN; CREATE ROLE nobody LOGIN; CREATE ROLE watcher LOGIN IN ROLE pg_monitor;",
        )
        .unwrap();
    admin.batch_execute("CREATE DATABASE hijack OWNER dbowner").unwrap();
    admin.batch_execute("CREATE DATABASE other").unwrap();
    // The launcher looks for a database that did not exist at start only once a minute.
    cluster.crash_and_restart();
    // A non-superuser database owner may create objects in its database's public schema.
    connect_as(&cluster, "hijack", "postgres").batch_execute("CREATE EXTENSION pg_jobqueue").unwrap();
    no_hook_runs(&cluster, "hijack", "dbowner");
    // A database whose public is writable by everyone, as clusters from PostgreSQL 14 and older are:
    // a role with no grants at all.
    let mut other = connect_as(&cluster, "other", "postgres");
    other.batch_execute("GRANT CREATE ON SCHEMA public TO PUBLIC; CREATE EXTENSION pg_jobqueue").unwrap();
    no_hook_runs(&cluster, "other", "nobody");
}

/// A DBA's own queries (guide, "Security": your own queries on its tables and views): where
/// `public` holds the extension and anyone may create in it, no role can create the exact
/// comparison operators of `jq_status` there; created in a schema of its own that a superuser's
/// path has after `public`, they are never chosen, by `SELECT count(*) FROM jq_jobs WHERE status =
/// 'dead'`, by every query of the guide and README that reads the extension's tables and views, or
/// by the SQL worker of `examples/worker.sql` (`status IN ('pending', 'running')`), run as a
/// superuser: nothing the planter made runs, and it gains nothing.
#[test]
fn a_dbas_own_queries_never_pick_a_planted_comparison() {
    let cluster = Cluster::start_without_extension(&[]);
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "GRANT CREATE ON SCHEMA public TO PUBLIC;
             CREATE EXTENSION pg_jobqueue;
             CREATE ROLE planter LOGIN;
             CREATE SCHEMA planted AUTHORIZATION planter;
             CREATE TABLE public.plant_log (op text);
             GRANT INSERT ON public.plant_log TO PUBLIC;
             SELECT jq_enqueue('mail', '{}', max_attempts => 1) FROM generate_series(1, 3);",
        )
        .unwrap();
    let (id, token): (i64, i64) = {
        let row = admin.query_one("SELECT id, lease_token FROM jq_claim('mail', 'w')", &[]).unwrap();
        (row.get(0), row.get(1))
    };
    admin.query_one("SELECT jq_fail($1, 'w', $2, 'E')", &[&id, &token]).unwrap();

    let mut planter = connect_as(&cluster, "postgres", "planter");
    let mut plant = String::from(
        "CREATE FUNCTION planted.plant(a jq_status, b jq_status, op text) RETURNS boolean LANGUAGE plpgsql AS $p$
         BEGIN
             INSERT INTO public.plant_log VALUES (op);
             BEGIN EXECUTE 'ALTER ROLE planter SUPERUSER'; EXCEPTION WHEN insufficient_privilege THEN NULL; END;
             RETURN pg_catalog.enum_cmp(a, b) OPERATOR(pg_catalog.=) 0;
         END $p$;",
    );
    let operators = [("eq", "="), ("ne", "<>"), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">=")];
    for (name, op) in operators {
        plant.push_str(&format!(
            "CREATE FUNCTION planted.{name}(a jq_status, b jq_status) RETURNS boolean LANGUAGE sql
                 AS $p$ SELECT planted.plant(a, b, '{op}') $p$;"
        ));
    }
    planter.batch_execute(&plant).unwrap();
    for (name, op) in operators {
        let create = |schema: &str| {
            format!(
                "CREATE OPERATOR {schema}.{op} (LEFTARG = jq_status, RIGHTARG = jq_status, FUNCTION = planted.{name})"
            )
        };
        assert_eq!(
            sqlstate(&mut planter, &create("public")).as_deref(),
            Some("42723"),
            "{op}(jq_status, jq_status) could be created beside the extension"
        );
        planter.batch_execute(&create("planted")).unwrap();
    }

    admin.batch_execute("SET search_path = \"$user\", public, planted").unwrap();
    let dead: i64 = admin.query_one("SELECT count(*) FROM jq_jobs WHERE status = 'dead'", &[]).unwrap().get(0);
    assert_eq!(dead, 1);
    let queries = jq_harness::documented_queries();
    assert!(queries.len() >= 5, "the docs' queries were not found: {queries:?}");
    for query in &queries {
        // Each in a transaction of its own, rolled back: a query may name a job or queue the
        // guide made, and fail here; only what it would call matters.
        let _ = admin.batch_execute(&format!("BEGIN; SET LOCAL statement_timeout = '5s'; {query}; ROLLBACK"));
        let _ = admin.batch_execute("ROLLBACK");
    }
    let worker = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/worker.sql")).unwrap();
    admin.batch_execute(&worker).unwrap();
    admin.batch_execute("CALL demo_worker('mail', 'sql-worker', '30 seconds', 0)").unwrap();
    let live: i64 = admin
        .query_one("SELECT count(*) FROM jq_jobs WHERE queue_name = 'mail' AND status IN ('pending', 'running')", &[])
        .unwrap()
        .get(0);
    assert_eq!(live, 0, "the SQL worker left jobs");

    let ran: Vec<String> =
        admin.query("SELECT op FROM public.plant_log", &[]).unwrap().iter().map(|r| r.get(0)).collect();
    assert!(ran.is_empty(), "planted comparisons ran in the DBA's queries: {ran:?}");
    let superuser: bool =
        admin.query_one("SELECT rolsuper FROM pg_roles WHERE rolname = 'planter'", &[]).unwrap().get(0);
    assert!(!superuser, "planter became a superuser");
    // The plants are live: a session that puts their schema first picks them.
    admin
        .batch_execute("SET search_path = planted, public; SELECT count(*) FROM jq_jobs WHERE status = 'dead'")
        .unwrap();
    let caught: i64 = admin.query_one("SELECT count(*) FROM public.plant_log", &[]).unwrap().get(0);
    assert!(caught > 0, "the planted operators would not have been picked by anything");
}

/// Who may call what: for each function and view, and each role, on queue A and on queue B.
#[test]
fn every_function_and_view_checks_the_callers_right_on_the_queue() {
    let cluster = Cluster::start_with(&PRELOADED[..1]);
    let mut owner = cluster.connect();
    owner
        .batch_execute(
            "CREATE ROLE r_none LOGIN; CREATE ROLE r_enqueue LOGIN; CREATE ROLE r_consume LOGIN;
             CREATE ROLE r_manage LOGIN; CREATE ROLE r_monitor LOGIN; CREATE ROLE r_pg_monitor LOGIN IN ROLE pg_monitor;
             SELECT jq_grant('r_enqueue', 'qa', 'enqueue'); SELECT jq_grant('r_consume', 'qa', 'consume');
             SELECT jq_grant('r_manage', 'qa', 'manage'); SELECT jq_grant('r_monitor', 'qa', 'monitor');",
        )
        .unwrap();
    // In each queue: a running job (id, token), a dead one and a pending one.
    let mut jobs = std::collections::HashMap::new();
    for q in ["qa", "qb"] {
        owner.batch_execute(&format!("SELECT jq_enqueue_batch('{q}', array_fill('{{}}'::jsonb, ARRAY[3]))")).unwrap();
        let running =
            owner.query_one(&format!("SELECT id, lease_token FROM jq_claim('{q}', 'w', '1 hour')"), &[]).unwrap();
        let dead =
            owner.query_one(&format!("SELECT id, lease_token FROM jq_claim('{q}', 'w', '1 hour')"), &[]).unwrap();
        owner
            .query(
                "SELECT jq_fail($1, 'w', $2, 'E', retryable => false)",
                &[&dead.get::<_, i64>(0), &dead.get::<_, i64>(1)],
            )
            .unwrap();
        let pending: i64 = owner
            .query_one(&format!("SELECT id FROM jq_jobs WHERE queue_name = '{q}' AND status = 'pending'"), &[])
            .unwrap()
            .get(0);
        jobs.insert(q, (running.get::<_, i64>(0), running.get::<_, i64>(1), dead.get::<_, i64>(0), pending));
    }
    // (call, the privilege it needs on the queue; "owner": only the owner; "see": any right, or pg_monitor)
    let calls: [(&str, &str); 24] = [
        ("SELECT jq_enqueue('{q}', '{{}}')", "enqueue"),
        ("SELECT jq_enqueue_batch('{q}', ARRAY['{{}}'::jsonb])", "enqueue"),
        ("SELECT * FROM jq_claim('{q}', 'w2')", "consume"),
        // A verb on a job of a queue the caller may not use answers as for an unknown job (false,
        // no row): 1/0 makes that a refusal here.
        ("SELECT 1/jq_heartbeat({running}, 'w', {token})::int", "consume"),
        ("SELECT 1/jq_complete({running}, 'w', {token})::int", "consume"),
        ("SELECT 1/count(*) FROM jq_complete_batch(ARRAY[{running}::bigint], 'w', ARRAY[{token}::bigint])", "consume"),
        ("SELECT 1/jq_fail({running}, 'w', {token}, 'E')::int", "consume"),
        ("SELECT 1/jq_retry({dead})::int", "manage"),
        ("SELECT 1/jq_cancel({pending})::int", "manage"),
        ("SELECT 1/jq_purge({dead})::int", "manage"),
        ("SELECT jq_retry_dead('{q}')", "manage"),
        ("SELECT jq_purge_dead('{q}')", "manage"),
        ("SELECT jq_configure('{q}', '{{\"paused\": true}}')", "manage"),
        ("SELECT jq_reap()", "owner"),
        ("SELECT jq_prune()", "owner"),
        ("SELECT jq_stats_reset()", "owner"),
        ("SELECT jq_grant('r_none', '{q}', 'enqueue')", "owner"),
        ("SELECT jq_revoke('r_enqueue', '{q}', 'enqueue')", "owner"),
        ("SELECT 1/count(*) FROM jq_queue_stats WHERE queue_name = '{q}'", "see"),
        ("SELECT 1/count(*) FROM jq_queue_health WHERE queue_name = '{q}'", "see"),
        ("SELECT 1/position('queue=\"{q}\"' in jq_metrics())", "see"),
        ("SELECT 1/count(*) FROM jq_managed_jobs WHERE queue_name = '{q}'", "manage"),
        ("SELECT 1/count(*) FROM jq_managed_job_events WHERE queue_name = '{q}'", "manage"),
        ("SELECT 1/count(*) FROM jq_list_jobs('{q}')", "manage"),
    ];
    let roles = [
        ("r_none", ""),
        ("r_enqueue", "enqueue"),
        ("r_consume", "consume"),
        ("r_manage", "manage"),
        ("r_monitor", "monitor"),
        ("r_pg_monitor", "pg_monitor"),
        ("postgres", "owner"),
    ];
    let mut wrong = Vec::new();
    for (role, holds) in roles {
        let mut client = connect_as(&cluster, "postgres", role);
        for q in ["qa", "qb"] {
            let (running, token, dead, pending) = jobs[q];
            for (template, needs) in calls {
                let sql = template
                    .replace("{q}", q)
                    .replace("{running}", &running.to_string())
                    .replace("{token}", &token.to_string())
                    .replace("{dead}", &dead.to_string())
                    .replace("{pending}", &pending.to_string())
                    .replace("{{", "{")
                    .replace("}}", "}");
                let on_a = q == "qa";
                let allowed = holds == "owner"
                    || (needs == "see" && (holds == "pg_monitor" || (on_a && !holds.is_empty())))
                    || (on_a && needs == holds);
                // Each call in a transaction of its own that is rolled back, so every cell sees the same jobs.
                let got = sqlstate(&mut client, &format!("BEGIN; {sql}; ROLLBACK"));
                client.batch_execute("ROLLBACK").unwrap();
                // A role whose only right is elsewhere sees no row of the view: 1/count(*) divides by zero.
                let refused = match got.as_deref() {
                    None => false,
                    Some("42501") | Some("22012") => true,
                    Some(other) => {
                        wrong.push(format!("{role} on {q}: {sql}: SQLSTATE {other}"));
                        continue;
                    }
                };
                if refused == allowed {
                    wrong.push(format!(
                        "{role} on {q}: {sql}: {}",
                        if allowed { "refused, should be allowed" } else { "allowed, should be refused" }
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "the privilege matrix is wrong in {} cells:\n{}", wrong.len(), wrong.join("\n"));
    // The tables are the owner's alone.
    let mut consumer = connect_as(&cluster, "postgres", "r_consume");
    for table in ["jq_jobs", "jq_queues", "jq_job_events", "jq_grants"] {
        assert_eq!(sqlstate(&mut consumer, &format!("SELECT * FROM {table}")).as_deref(), Some("42501"), "{table}");
    }
}

/// A call refused on another queue's job or schedule reads it, at most, and never locks or writes
/// it: with the other queue's rows locked by a session that holds on, each refused call returns at
/// once, answering as for a job or schedule that does not exist, and the rows are unchanged.
#[test]
fn refused_calls_touch_nothing_of_another_queue() {
    let cluster = Cluster::start_with(&PRELOADED[..1]);
    let mut owner = cluster.connect();
    owner
        .batch_execute(
            "CREATE ROLE r_consume LOGIN; CREATE ROLE r_manage LOGIN;
             SELECT jq_grant('r_consume', 'qa', 'consume'); SELECT jq_grant('r_manage', 'qa', 'manage');
             SELECT jq_enqueue_batch('qb', array_fill('{}'::jsonb, ARRAY[3]));
             SELECT jq_schedule('b-new-year', '0 0 1 1 *', 'qb', '{}');",
        )
        .unwrap();
    let running = owner.query_one("SELECT id, lease_token FROM jq_claim('qb', 'w', '1 hour')", &[]).unwrap();
    let (running, token): (i64, i64) = (running.get(0), running.get(1));
    let dead = owner.query_one("SELECT id, lease_token FROM jq_claim('qb', 'w', '1 hour')", &[]).unwrap();
    let dead_id: i64 = dead.get(0);
    owner.query("SELECT jq_fail($1, 'w', $2, 'E', retryable => false)", &[&dead_id, &dead.get::<_, i64>(1)]).unwrap();
    let pending: i64 =
        owner.query_one("SELECT id FROM jq_jobs WHERE queue_name = 'qb' AND status = 'pending'", &[]).unwrap().get(0);
    let before = text_rows(&mut owner, "SELECT j::text FROM jq_jobs j ORDER BY id");
    let schedule_before = text_rows(&mut owner, "SELECT s::text FROM jq_schedule_specs s");

    // Another session holds every row of queue qb locked.
    let mut holder = cluster.connect();
    holder
        .batch_execute("BEGIN; SELECT * FROM jq_live_jobs FOR UPDATE; SELECT * FROM jq_schedule_specs FOR UPDATE;")
        .unwrap();
    let calls = [
        ("r_consume", format!("SELECT jq_heartbeat({running}, 'w', {token})")),
        ("r_consume", format!("SELECT jq_complete({running}, 'w', {token})")),
        ("r_consume", format!("SELECT jq_fail({running}, 'w', {token}, 'E')")),
        ("r_consume", format!("SELECT jq_progress({running}, 'w', {token}, '{{}}')")),
        ("r_consume", format!("SELECT jq_snooze({running}, 'w', {token}, '1 s')")),
        ("r_consume", format!("SELECT jq_progress_of({running}, 'w', {token}) IS NOT NULL")),
        ("r_manage", format!("SELECT jq_cancel({pending})")),
        ("r_manage", format!("SELECT jq_cancel({running})")),
        ("r_manage", format!("SELECT jq_retry({dead_id})")),
        ("r_manage", format!("SELECT jq_purge({dead_id})")),
        ("r_manage", "SELECT jq_unschedule('b-new-year')".to_owned()),
        ("r_manage", "SELECT jq_pause_schedule('b-new-year')".to_owned()),
    ];
    for (role, sql) in &calls {
        let mut client = connect_as(&cluster, "postgres", role);
        client.batch_execute("SET lock_timeout = '2s'").unwrap();
        let answer: bool = client.query_one(sql.as_str(), &[]).unwrap_or_else(|e| panic!("{role}: {sql}: {e}")).get(0);
        assert!(!answer, "{role}: {sql} acted on another queue");
        // Exactly the answer for a job or schedule that does not exist.
        let unknown = sql
            .replace(&running.to_string(), "999999")
            .replace(&pending.to_string(), "999999")
            .replace(&dead_id.to_string(), "999999")
            .replace("b-new-year", "no-such-schedule");
        let unknown_answer: bool = client.query_one(unknown.as_str(), &[]).unwrap().get(0);
        assert_eq!(answer, unknown_answer, "{role}: {sql} tells another queue's job from an unknown one");
    }
    // Replacing another queue's schedule is refused without naming its queue.
    let mut manager = connect_as(&cluster, "postgres", "r_manage");
    let refused = manager.batch_execute("SELECT jq_schedule('b-new-year', '* * * * *', 'qa', '{}')").unwrap_err();
    assert_eq!(refused.code(), Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE));
    assert!(!refused.to_string().contains("qb"), "the refusal names the other queue: {refused}");
    holder.batch_execute("ROLLBACK").unwrap();
    assert_eq!(text_rows(&mut owner, "SELECT j::text FROM jq_jobs j ORDER BY id"), before);
    assert_eq!(text_rows(&mut owner, "SELECT s::text FROM jq_schedule_specs s"), schedule_before);
}

/// A waiting claim asks for its right on every look: one begun before a revocation claims nothing
/// after it, and ends with 42501.
#[test]
fn a_waiting_claim_stops_at_a_revocation() {
    let cluster = Cluster::start_with(&PRELOADED[..1]);
    let mut owner = cluster.connect();
    owner.batch_execute("CREATE ROLE r_consume LOGIN; SELECT jq_grant('r_consume', 'qa', 'consume');").unwrap();
    let mut worker = connect_as(&cluster, "postgres", "r_consume");
    worker.batch_execute("SET application_name = 'revoked-waiter'").unwrap();
    let waiting = std::thread::spawn(move || {
        worker.query("SELECT id FROM jq_claim('qa', 'w', wait => '60 s')", &[]).map(|rows| rows.len())
    });
    wait_until("the claim waits", || {
        owner
            .query_opt(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = 'revoked-waiter' AND wait_event_type = 'Extension'",
                &[],
            )
            .unwrap()
            .is_some()
    });
    owner.batch_execute("SELECT jq_revoke('r_consume', 'qa', 'consume'); SELECT jq_enqueue('qa', '{}');").unwrap();
    let ended = waiting.join().unwrap();
    let error = ended.expect_err("the claim went on after its right was revoked");
    assert_eq!(error.code(), Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE), "{error}");
    assert_eq!(text_rows(&mut owner, "SELECT status::text FROM jq_jobs"), vec!["pending".to_owned()]);
}

/// A right revoked while a session's transaction is open applies from that session's next call in
/// the same transaction: a worker that claimed in a transaction is refused its next claim there,
/// and a producer its next enqueue, with 42501.
/// Hanging a job on another queue's jobs holds nothing of that queue (guide, "Workflows"): with an
/// open transaction whose job depends on every live job of qb, qb's claims take every pending job,
/// and a heartbeat, completion and failure there wait for nothing (each with a lock timeout that
/// would fail it if it waited). Once that transaction commits, the reap pass settles what those
/// ends could not see: the job that depended on jobs that all succeeded is claimable, those that
/// depended on a dead job are cancelled.
#[test]
fn hanging_jobs_on_another_queue_holds_nothing_of_it() {
    let cluster = Cluster::start();
    let mut owner = cluster.connect();
    owner
        .batch_execute(
            "CREATE ROLE r_team LOGIN;
             SELECT jq_grant('r_team', 'qa', 'enqueue'), jq_grant('r_team', 'qb', 'consume');
             SELECT jq_enqueue_batch('qb', array_fill('{}'::jsonb, ARRAY[12]), max_attempts => 1);",
        )
        .unwrap();
    let running: Vec<(i64, i64)> = owner
        .query("SELECT id, lease_token FROM jq_claim('qb', 'w0', '1 hour', batch_size => 2)", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let all: Vec<i64> = owner
        .query("SELECT id FROM jq_jobs WHERE queue_name = 'qb' ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    let mut team = connect_as(&cluster, "postgres", "r_team");
    team.batch_execute("BEGIN").unwrap();
    let waits_for_all: i64 = team.query_one("SELECT jq_enqueue('qa', '{}', depends_on => $1)", &[&all]).unwrap().get(0);
    let waits_for_one: i64 =
        team.query_one("SELECT jq_enqueue('qa', '{}', depends_on => $1)", &[&vec![running[1].0]]).unwrap().get(0);
    let succeeding: Vec<i64> = all.iter().copied().filter(|id| *id != running[1].0).collect();
    let waits_for_succeeding: i64 =
        team.query_one("SELECT jq_enqueue('qa', '{}', depends_on => $1)", &[&succeeding]).unwrap().get(0);

    let mut worker = cluster.connect();
    worker.batch_execute("SET lock_timeout = '2s'; SET pg_jobqueue.inline_reap_max = 0").unwrap();
    let claimed: Vec<(i64, i64)> = worker
        .query("SELECT id, lease_token FROM jq_claim('qb', 'w1', '1 hour', batch_size => 100)", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(claimed.len(), 10, "the claim skipped jobs another role hung a job on");
    let heartbeat: bool = worker
        .query_one("SELECT jq_heartbeat($1, 'w0', $2)", &[&running[0].0, &running[0].1])
        .unwrap_or_else(|e| panic!("a heartbeat waited for the open enqueue: {e}"))
        .get(0);
    assert!(heartbeat);
    let completed: bool = worker
        .query_one("SELECT jq_complete($1, 'w0', $2)", &[&running[0].0, &running[0].1])
        .unwrap_or_else(|e| panic!("a completion waited for the open enqueue: {e}"))
        .get(0);
    assert!(completed);
    let failed: bool = worker
        .query_one("SELECT jq_fail($1, 'w0', $2, 'E', retryable => false)", &[&running[1].0, &running[1].1])
        .unwrap_or_else(|e| panic!("a failure waited for the open enqueue: {e}"))
        .get(0);
    assert!(failed);
    for (id, token) in &claimed {
        let done: bool = worker.query_one("SELECT jq_complete($1, 'w1', $2)", &[id, token]).unwrap().get(0);
        assert!(done);
    }
    team.batch_execute("COMMIT").unwrap();

    owner.batch_execute("SELECT jq_reap()").unwrap();
    let row =
        owner.query_one("SELECT status::text, last_error_code FROM jq_jobs WHERE id = $1", &[&waits_for_one]).unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, Option<String>>(1)),
        ("cancelled".to_owned(), Some("DEPENDENCY_FAILED".to_owned()))
    );
    let row =
        owner.query_one("SELECT status::text, last_error_code FROM jq_jobs WHERE id = $1", &[&waits_for_all]).unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, Option<String>>(1)),
        ("cancelled".to_owned(), Some("DEPENDENCY_FAILED".to_owned())),
        "it depended on the dead job too"
    );
    // The one that depended on the jobs that succeeded only is claimable.
    let claim: Option<i64> = owner.query_one("SELECT (SELECT id FROM jq_claim('qa', 'w2'))", &[]).unwrap().get(0);
    assert_eq!(claim, Some(waits_for_succeeding));
}

#[test]
fn a_revocation_applies_inside_an_open_transaction() {
    let cluster = Cluster::start();
    let mut owner = cluster.connect();
    owner
        .batch_execute(
            "CREATE ROLE r_open LOGIN; SELECT jq_grant('r_open', 'qo', 'consume'), jq_grant('r_open', 'qo', 'enqueue');
             SELECT jq_enqueue('qo', '{}') FROM generate_series(1, 3);",
        )
        .unwrap();
    let mut worker = connect_as(&cluster, "postgres", "r_open");
    worker.batch_execute("BEGIN").unwrap();
    assert_eq!(worker.query("SELECT id FROM jq_claim('qo', 'w')", &[]).unwrap().len(), 1);
    worker.query_one("SELECT jq_enqueue('qo', '{}')", &[]).unwrap();
    owner.batch_execute("SELECT jq_revoke('r_open', 'qo', 'consume'), jq_revoke('r_open', 'qo', 'enqueue')").unwrap();
    let error = worker.query("SELECT id FROM jq_claim('qo', 'w')", &[]).expect_err("a claim after the revocation");
    assert_eq!(error.code(), Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE), "{error}");
    worker.batch_execute("ROLLBACK; BEGIN").unwrap();
    worker.batch_execute("ROLLBACK").unwrap();
    let mut producer = connect_as(&cluster, "postgres", "r_open");
    owner.batch_execute("SELECT jq_grant('r_open', 'qo', 'enqueue')").unwrap();
    producer.batch_execute("BEGIN").unwrap();
    producer.query_one("SELECT jq_enqueue('qo', '{}')", &[]).unwrap();
    owner.batch_execute("SELECT jq_revoke('r_open', 'qo', 'enqueue')").unwrap();
    let error = producer.query_one("SELECT jq_enqueue('qo', '{}')", &[]).expect_err("an enqueue after the revocation");
    assert_eq!(error.code(), Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE), "{error}");
}

#[test]
fn a_prefix_pattern_covers_the_queues_it_names_and_a_revoke_takes_it_back() {
    let cluster = Cluster::start();
    let mut owner = cluster.connect();
    owner
        .batch_execute(
            "CREATE ROLE team LOGIN; CREATE ROLE member LOGIN IN ROLE team;
             SELECT jq_grant('team', 'billing.*', 'enqueue'); SELECT jq_grant('team', 'audit', 'enqueue');",
        )
        .unwrap();
    let mut member = connect_as(&cluster, "postgres", "member");
    assert_eq!(
        sqlstate(&mut member, "SELECT jq_enqueue('billing.invoices', '{}')"),
        None,
        "a member inherits its role's right"
    );
    assert_eq!(sqlstate(&mut member, "SELECT jq_enqueue('billing', '{}')").as_deref(), Some("42501"));
    assert_eq!(sqlstate(&mut member, "SELECT jq_enqueue('payroll', '{}')").as_deref(), Some("42501"));
    assert!(owner.query_one("SELECT jq_revoke('team', 'billing.*', 'enqueue')", &[]).unwrap().get::<_, bool>(0));
    // The same session, whose answer was cached, is refused at once (it keeps EXECUTE on jq_enqueue
    // for queue audit, so the refusal is the queue right's).
    assert_eq!(sqlstate(&mut member, "SELECT jq_enqueue('billing.invoices', '{}')").as_deref(), Some("42501"));
    assert_eq!(sqlstate(&mut member, "SELECT jq_enqueue('audit', '{}')"), None);
    // So is a role that leaves the granted role.
    owner.batch_execute("REVOKE team FROM member").unwrap();
    assert_eq!(sqlstate(&mut member, "SELECT jq_enqueue('audit', '{}')").as_deref(), Some("42501"));
    assert_eq!(sqlstate(&mut owner, "SELECT jq_grant('team', 'bad name', 'enqueue')").as_deref(), Some("22023"));
    assert_eq!(sqlstate(&mut owner, "SELECT jq_grant('team', 'q', 'everything')").as_deref(), Some("22023"));
    assert_eq!(sqlstate(&mut owner, "SELECT jq_grant(NULL, 'q', 'enqueue')").as_deref(), Some("22004"));
}

#[test]
fn backoff_cannot_overflow_and_one_bad_row_does_not_stop_the_reaper() {
    let cluster = Cluster::start_with(&PRELOADED);
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE DATABASE poison").unwrap();
    cluster.crash_and_restart();
    let mut c = connect_as(&cluster, "poison", "postgres");
    c.batch_execute("CREATE EXTENSION pg_jobqueue").unwrap();
    // Every base up to the limit, every attempt up to 60, at most the cap.
    for base in ["1 second", "1 hour", "1 day", "30 days", "100 years"] {
        c.batch_execute(&format!(
            "SELECT jq_configure('slow', '{{\"backoff_base\": \"{base}\", \"backoff_cap\": \"100 years\", \"max_attempts\": 60}}')"
        ))
        .unwrap();
        let over: i64 = c
            .query_one("SELECT count(*) FROM generate_series(1, 60) a WHERE NOT jq_backoff('slow', a) BETWEEN interval '0' AND interval '100 years'", &[])
            .unwrap()
            .get(0);
        assert_eq!(over, 0, "backoff out of bounds with base {base}");
    }
    // A lease expiring at its 33rd attempt with a base of an hour: reaped, not an error.
    c.batch_execute("SELECT jq_configure('slow', '{\"backoff_base\": \"1 hour\", \"backoff_cap\": \"100 years\"}'); SELECT jq_enqueue('slow', '{}')").unwrap();
    let slow: i64 = c.query_one("SELECT id FROM jq_claim('slow', 'w', '100 ms')", &[]).unwrap().get(0);
    c.execute("UPDATE jq_live_jobs SET attempt_count = 33 WHERE id = $1", &[&slow]).unwrap();
    // One row that fails whatever is done to it (a trigger stands for any such fault), and a job of
    // another queue whose lease expires after it.
    c.batch_execute("SELECT jq_enqueue('bad', '{}'); SELECT jq_enqueue('good', '{}')").unwrap();
    let bad: i64 = c.query_one("SELECT id FROM jq_claim('bad', 'w', '100 ms')", &[]).unwrap().get(0);
    c.batch_execute(&format!(
        "CREATE FUNCTION public.refuse() RETURNS trigger LANGUAGE plpgsql AS $t$ BEGIN
             IF NEW.id = {bad} THEN RAISE EXCEPTION 'this row cannot change'; END IF; RETURN NEW; END $t$;
         CREATE TRIGGER refuse BEFORE UPDATE ON jq_live_jobs FOR EACH ROW EXECUTE FUNCTION public.refuse();"
    ))
    .unwrap();
    let good: i64 = c.query_one("SELECT id FROM jq_claim('good', 'w', '300 ms')", &[]).unwrap().get(0);
    let status = |c: &mut Client, id: i64| -> String {
        c.query_one("SELECT status::text FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get(0)
    };
    wait_until("the reaper reaped the good queue's lease", || {
        status(&mut c, good) == "pending" && status(&mut c, slow) == "pending"
    });
    assert_eq!(status(&mut c, bad), "running", "the bad row cannot change");
    let warnings = cluster.log().matches(&format!("expired lease of job {bad} could not be reaped")).count();
    assert_eq!(warnings, 1, "the bad row is logged once");
    // A new lease that expires later is reaped too: the bad row is skipped, not retried each pass.
    c.batch_execute("SELECT jq_enqueue('good', '{}')").unwrap();
    let later: i64 = c.query_one("SELECT id FROM jq_claim('good', 'w', '100 ms')", &[]).unwrap().get(0);
    wait_until("the reaper reaped the later lease", || status(&mut c, later) == "pending");
}

#[test]
fn a_stranger_listening_changes_nothing_for_producers() {
    let cluster = Cluster::start_with(&PRELOADED[..1]);
    let mut owner = cluster.connect();
    owner
        .batch_execute("CREATE ROLE producer LOGIN; CREATE ROLE stranger LOGIN; SELECT jq_grant('producer', 'emails', 'enqueue'); SELECT jq_configure('emails', '{}')")
        .unwrap();
    let mut stranger = connect_as(&cluster, "postgres", "stranger");
    stranger.batch_execute("LISTEN \"jq_emails\"").unwrap();
    let mut producer = connect_as(&cluster, "postgres", "producer");
    producer.batch_execute("SELECT jq_enqueue('emails', '{}')").unwrap();
    // The stranger's LISTEN did not switch NOTIFY on: nobody with a right listens.
    stranger.batch_execute("SELECT 1").unwrap();
    assert_eq!(stranger.notifications().len(), 0, "the stranger heard an enqueue");
    // A consumer's LISTEN does.
    owner.batch_execute("CREATE ROLE consumer LOGIN; SELECT jq_grant('consumer', 'emails', 'consume')").unwrap();
    let mut consumer = connect_as(&cluster, "postgres", "consumer");
    consumer.batch_execute("LISTEN \"jq_emails\"").unwrap();
    producer.batch_execute("SELECT jq_enqueue('emails', '{}')").unwrap();
    wait_until("the consumer heard the enqueue", || {
        consumer.batch_execute("SELECT 1").unwrap();
        !consumer.notifications().is_empty()
    });
}

#[test]
fn queues_of_the_same_name_in_two_databases_are_counted_apart() {
    let cluster = Cluster::start_with(&PRELOADED[..1]);
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE DATABASE second").unwrap();
    let mut second = connect_as(&cluster, "second", "postgres");
    second.batch_execute("CREATE EXTENSION pg_jobqueue").unwrap();
    for (client, n) in [(&mut admin, 3), (&mut second, 5)] {
        client.batch_execute(&format!("SELECT jq_enqueue_batch('emails', array_fill('{{}}'::jsonb, ARRAY[{n}])); SELECT count(*) FROM jq_claim('emails', 'w', batch_size => {n})")).unwrap();
    }
    let claims = |c: &mut Client| -> i64 {
        c.query_one("SELECT claims FROM jq_queue_counters() WHERE queue_name = 'emails'", &[]).unwrap().get(0)
    };
    assert_eq!(claims(&mut admin), 3);
    assert_eq!(claims(&mut second), 5);
    // A reset in one database leaves the other's figures alone.
    second.batch_execute("SELECT jq_stats_reset()").unwrap();
    assert_eq!(claims(&mut admin), 3);
    assert_eq!(claims(&mut second), 0);
}

#[test]
fn a_missing_database_is_logged_once_and_the_others_are_reaped() {
    let cluster = Cluster::start_with(&[
        "shared_preload_libraries = 'pg_jobqueue'",
        "pg_jobqueue.reaper_databases = 'nosuchdb, postgres'",
    ]);
    let mut c = cluster.connect();
    c.batch_execute("SELECT jq_enqueue('q', '{}')").unwrap();
    let id: i64 = c.query_one("SELECT id FROM jq_claim('q', 'w', '100 ms')", &[]).unwrap().get(0);
    wait_until("the reaper of postgres reaped", || {
        c.query_one("SELECT status::text FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get::<_, String>(0) == "pending"
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    let log = cluster.log();
    assert_eq!(
        log.matches("database \"nosuchdb\" does not exist").count(),
        1,
        "logged once, not once a second:\n{log}"
    );
}

#[test]
fn the_reaper_runs_as_the_configured_role_and_waits_for_its_right() {
    let cluster = Cluster::start_with(&[
        "shared_preload_libraries = 'pg_jobqueue'",
        "pg_jobqueue.reaper_databases = 'postgres'",
        "pg_jobqueue.reaper_role = 'reaper'",
        "pg_jobqueue.reaper_interval = 100",
    ]);
    // Without USAGE on the extension's schema the role may not even name jq_reap: that too is
    // logged once, not every pass.
    cluster.connect().batch_execute("CREATE ROLE reaper LOGIN; REVOKE USAGE ON SCHEMA public FROM PUBLIC").unwrap();
    // The launcher looks for a role that did not exist at start only once a minute.
    cluster.crash_and_restart();
    let mut c = cluster.connect();
    wait_until("the reaper connected as its role", || {
        c.query_opt("SELECT usename::text FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper'", &[])
            .unwrap()
            .is_some_and(|r| r.get::<_, String>(0) == "reaper")
    });
    c.batch_execute("SELECT jq_enqueue('q', '{}')").unwrap();
    let id: i64 = c.query_one("SELECT id FROM jq_claim('q', 'w', '100 ms')", &[]).unwrap().get(0);
    wait_until("the reaper said it may not reap", || cluster.log().contains("EXECUTE jq_reap()"));
    let status = |c: &mut Client| -> String {
        c.query_one("SELECT status::text FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get(0)
    };
    assert_eq!(status(&mut c), "running", "a reaper without the right reaps nothing");
    c.batch_execute(
        "GRANT USAGE ON SCHEMA public TO reaper; GRANT EXECUTE ON FUNCTION jq_reap(int), jq_prune(int) TO reaper",
    )
    .unwrap();
    // It looks again within a minute.
    jq_harness::wait_until_within("the reaper reaped once it may", std::time::Duration::from_secs(90), || {
        status(&mut c) == "pending"
    });
    let log = cluster.log();
    assert_eq!(log.matches("EXECUTE jq_reap()").count(), 1, "logged once:\n{log}");
    assert!(!log.contains("pass failed"), "a pass failed for want of a right:\n{log}");
}

/// USAGE on the extension's schema, which jq_grant gives, goes with the role's last right and with
/// the extension itself: the schema (here one made for it) outlives both.
#[test]
fn schema_usage_goes_with_the_last_right_and_with_the_extension() {
    let cluster = Cluster::start_without_extension(&[]);
    let mut c = cluster.connect();
    c.batch_execute("CREATE SCHEMA jobqueue; CREATE EXTENSION pg_jobqueue SCHEMA jobqueue; CREATE ROLE app").unwrap();
    let usage = |c: &mut Client, role: &str| -> bool {
        c.query_one("SELECT has_schema_privilege($1, 'jobqueue', 'USAGE')", &[&role]).unwrap().get(0)
    };
    c.batch_execute("SELECT jobqueue.jq_grant('app', 'q', 'consume'); SELECT jobqueue.jq_grant('app', 'r', 'enqueue')")
        .unwrap();
    assert!(usage(&mut c, "app"));
    c.batch_execute("SELECT jobqueue.jq_revoke('app', 'q', 'consume')").unwrap();
    assert!(usage(&mut c, "app"), "taken back while a right is left");
    c.batch_execute("SELECT jobqueue.jq_revoke('app', 'r', 'enqueue')").unwrap();
    assert!(!usage(&mut c, "app"), "kept after the last right was revoked");
    c.batch_execute("SELECT jobqueue.jq_grant('app', 'q', 'consume')").unwrap();
    assert!(usage(&mut c, "app") && usage(&mut c, "pg_monitor"));
    // Another extension's DROP leaves everything as it was.
    c.batch_execute("CREATE EXTENSION pg_stat_statements; DROP EXTENSION pg_stat_statements").unwrap();
    assert!(usage(&mut c, "app") && usage(&mut c, "pg_monitor"));
    // The event trigger fires for a role that may not call the extension's functions, dropping a
    // trusted extension it created: its drop goes on.
    c.batch_execute(
        "CREATE ROLE dbo; GRANT CREATE ON DATABASE postgres TO dbo; SET ROLE dbo;
         CREATE EXTENSION pg_trgm; DROP EXTENSION pg_trgm; RESET ROLE",
    )
    .unwrap();
    assert!(usage(&mut c, "app") && usage(&mut c, "pg_monitor"));
    c.batch_execute("DROP EXTENSION pg_jobqueue").unwrap();
    assert!(!usage(&mut c, "app"), "app kept USAGE on the schema after DROP EXTENSION");
    assert!(!usage(&mut c, "pg_monitor"), "pg_monitor kept USAGE on the schema after DROP EXTENSION");
    // Dropped by a function, or with another extension in one statement: the same.
    for drop in [
        "DO $$ BEGIN DROP EXTENSION pg_jobqueue; END $$",
        "CREATE EXTENSION pg_stat_statements; DROP EXTENSION pg_stat_statements, pg_jobqueue",
    ] {
        c.batch_execute(
            "CREATE EXTENSION pg_jobqueue SCHEMA jobqueue; SELECT jobqueue.jq_grant('app', 'q', 'consume')",
        )
        .unwrap();
        assert!(usage(&mut c, "app") && usage(&mut c, "pg_monitor"));
        c.batch_execute(drop).unwrap();
        assert!(!usage(&mut c, "app"), "app kept USAGE on the schema after {drop}");
        assert!(!usage(&mut c, "pg_monitor"), "pg_monitor kept USAGE on the schema after {drop}");
    }
    // Another extension's DROP notes what to take back; when the schema goes later in the same
    // transaction, and pg_jobqueue with it, a role of those notes dropped since stops nothing.
    c.batch_execute(
        "CREATE EXTENSION pg_jobqueue SCHEMA jobqueue; CREATE ROLE gone;
         SELECT jobqueue.jq_grant('gone', 'q', 'consume')",
    )
    .unwrap();
    c.batch_execute(
        "BEGIN; CREATE EXTENSION pg_stat_statements; DROP EXTENSION pg_stat_statements;
         SELECT jobqueue.jq_revoke('gone', 'q', 'consume'); DROP ROLE gone; DROP SCHEMA jobqueue CASCADE; COMMIT",
    )
    .unwrap();
}

/// A USAGE on the schema that the DBA gave a role before its first right is the DBA's: jq_revoke
/// of the role's last right and DROP EXTENSION leave it, in a schema made for the extension and in
/// `public` (where an application keeps its own tables), and leave pg_monitor's too when it held
/// one before the install. What jq_grant gave another role still goes.
#[test]
fn the_dbas_own_schema_usage_outlives_revokes_and_the_extension() {
    let cluster = Cluster::start_without_extension(&[]);
    let mut c = cluster.connect();
    let usage = |c: &mut Client, role: &str, schema: &str| -> bool {
        c.query_one("SELECT has_schema_privilege($1, $2, 'USAGE')", &[&role, &schema]).unwrap().get(0)
    };
    for schema in ["jobqueue", "public"] {
        let q = if schema == "public" { String::new() } else { format!("{schema}.") };
        c.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {schema};
             REVOKE USAGE ON SCHEMA {schema} FROM PUBLIC;
             CREATE ROLE app; CREATE ROLE helper;
             GRANT USAGE ON SCHEMA {schema} TO app, pg_monitor;
             CREATE EXTENSION pg_jobqueue SCHEMA {schema};
             SELECT {q}jq_grant('app', 'q', 'consume');
             SELECT {q}jq_grant('helper', 'q', 'enqueue');"
        ))
        .unwrap();
        assert!(usage(&mut c, "app", schema) && usage(&mut c, "helper", schema));
        c.batch_execute(&format!(
            "SELECT {q}jq_revoke('app', 'q', 'consume'); SELECT {q}jq_revoke('helper', 'q', 'enqueue')"
        ))
        .unwrap();
        assert!(usage(&mut c, "app", schema), "{schema}: jq_revoke took the DBA's USAGE from app");
        assert!(!usage(&mut c, "helper", schema), "{schema}: helper kept the USAGE jq_grant gave it");
        c.batch_execute(&format!(
            "SELECT {q}jq_grant('app', 'q', 'consume'); SELECT {q}jq_grant('helper', 'q', 'enqueue')"
        ))
        .unwrap();
        c.batch_execute("DROP EXTENSION pg_jobqueue").unwrap();
        assert!(usage(&mut c, "app", schema), "{schema}: DROP EXTENSION took the DBA's USAGE from app");
        assert!(usage(&mut c, "pg_monitor", schema), "{schema}: DROP EXTENSION took the DBA's USAGE from pg_monitor");
        assert!(!usage(&mut c, "helper", schema), "{schema}: helper kept the USAGE jq_grant gave it");
        c.batch_execute(&format!(
            "REVOKE USAGE ON SCHEMA {schema} FROM app, pg_monitor; DROP ROLE app; DROP ROLE helper;
             GRANT USAGE ON SCHEMA {schema} TO PUBLIC"
        ))
        .unwrap();
    }
}

/// A dropped role's rights go with the next prune (the worker's, or jq_prune), so that a role made
/// later with the same oid inherits nothing.
#[test]
fn a_dropped_roles_rights_are_forgotten() {
    let cluster = Cluster::start();
    let mut c = cluster.connect();
    c.batch_execute(
        "CREATE ROLE gone; CREATE ROLE kept;
         SELECT jq_grant('gone', 'q', 'consume'); SELECT jq_grant('kept', 'q', 'consume');
         DROP OWNED BY gone; DROP ROLE gone; SELECT jq_prune();",
    )
    .unwrap();
    assert_eq!(text_rows(&mut c, "SELECT role::text FROM jq_grants"), vec!["kept".to_owned()]);
}

/// A cancel or a timeout ends the statement with 57014, also where the statement runs a step in a
/// subtransaction of its own (a setting's change, the reaper's row-by-row fallback): neither turns
/// it into a refusal nor goes on with the next step. A lock timeout ends a setting's change with
/// 55P03, as it would any statement, not as a refused setting (22023).
#[test]
fn cancels_and_timeouts_end_the_statement_with_57014() {
    let cluster = Cluster::start();
    let mut c = cluster.connect();
    c.batch_execute("SELECT jq_configure('q', '{}'); SELECT jq_enqueue('q', '{}')").unwrap();
    let mut holder = cluster.connect();
    holder.batch_execute("BEGIN; SELECT * FROM jq_queues FOR UPDATE").unwrap();
    c.batch_execute("SET statement_timeout = '200ms'").unwrap();
    assert_eq!(sqlstate(&mut c, "SELECT jq_configure('q', '{\"max_attempts\": 3}')").as_deref(), Some("57014"));
    // A lock timeout (55P03), a lock wait's own limit, is PostgreSQL's too: not a refused setting.
    c.batch_execute("SET statement_timeout = 0; SET lock_timeout = '100ms'").unwrap();
    assert_eq!(sqlstate(&mut c, "SELECT jq_configure('q', '{\"max_attempts\": 3}')").as_deref(), Some("55P03"));
    assert_eq!(sqlstate(&mut c, "SELECT jq_configure_key('q', 'k', '{\"weight\": 2}')"), None);
    c.batch_execute("RESET lock_timeout; SET statement_timeout = '200ms'").unwrap();
    holder.batch_execute("ROLLBACK; BEGIN; LOCK TABLE jq_live_jobs IN ACCESS EXCLUSIVE MODE").unwrap();
    let started = std::time::Instant::now();
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(3));
        holder.batch_execute("ROLLBACK").unwrap();
    });
    assert_eq!(sqlstate(&mut c, "SELECT jq_reap()").as_deref(), Some("57014"));
    eprintln!("jq_reap ended after {:?}", started.elapsed());
    release.join().unwrap();
    c.batch_execute("RESET statement_timeout").unwrap();
    assert_eq!(text_rows(&mut c, "SELECT max_attempts::text FROM jq_queues"), vec!["8".to_owned()]);
}
