//! Maintenance in every database that has the extension (guide, "Maintenance"): the background
//! worker finds databases created after the server started, with no setting naming them; it never
//! stands in the way of `DROP DATABASE`, a rename or a copy; its workers are bounded; and
//! `jq_maintenance` says when nothing maintains a database. Without preload, claims do the passes.
//! Durations are printed, never asserted: the tests wait for states.

use std::time::{Duration, Instant};

use jq_harness::client::{sqlstate, status};
use jq_harness::{wait_until, Client, Cluster};

const PRELOADED: &str = "shared_preload_libraries = 'pg_jobqueue'";
const FAST: &str = "pg_jobqueue.reaper_interval = '200ms'";

fn connect_to(cluster: &Cluster, database: &str) -> Client {
    let dsn = cluster.dsn().replace("dbname=postgres", &format!("dbname={database}"));
    Client::connect(&dsn, postgres::NoTls).expect("connect to the database")
}

/// The databases a pg_jobqueue reaper is connected to now.
fn served(client: &mut Client) -> Vec<String> {
    client
        .query("SELECT datname::text FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper' ORDER BY 1", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// A database made after the server started, with the extension, an every-second schedule and a
/// job abandoned under a one-second lease. Returns the job's id.
fn new_database_with_work(cluster: &Cluster, name: &str) -> i64 {
    cluster.connect().batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    let mut client = connect_to(cluster, name);
    client
        .batch_execute(
            "CREATE EXTENSION pg_jobqueue;
             SELECT jq_schedule('every-second', '* * * * * *', 'ticks', '{}');",
        )
        .unwrap();
    client.query_one("SELECT jq_enqueue('work', '{}')", &[]).unwrap();
    client.query_one("SELECT id FROM jq_claim('work', 'crashed', interval '1 second')", &[]).unwrap().get(0)
}

fn ticks(client: &mut Client) -> i64 {
    client.query_one("SELECT count(*) FROM jq_jobs WHERE queue_name = 'ticks'", &[]).unwrap().get(0)
}

/// Two databases created after the server started, named by no setting: each gets its worker
/// within seconds of CREATE EXTENSION, which reaps its abandoned lease and ticks its schedule with
/// nobody calling anything; `jq_maintenance` says so. A database whose extension is dropped is left.
#[test]
fn databases_created_after_start_are_each_reaped_and_ticked() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST]);
    let started = Instant::now();
    let jobs = [
        ("app_one", new_database_with_work(&cluster, "app_one")),
        ("app_two", new_database_with_work(&cluster, "app_two")),
    ];
    for (name, id) in jobs {
        let mut client = connect_to(&cluster, name);
        wait_until(&format!("the lease in {name} is reaped"), || status(&mut client, id) == "pending");
        wait_until(&format!("the schedule of {name} ticked"), || ticks(&mut client) >= 2);
        println!("{name}: reaped and ticked {:.1} s after the databases were made", started.elapsed().as_secs_f64());
        let row =
            client.query_one("SELECT served_by, stale, last_reap_at IS NOT NULL FROM jq_maintenance", &[]).unwrap();
        assert_eq!(
            (row.get::<_, String>(0), row.get::<_, bool>(1), row.get::<_, bool>(2)),
            ("worker".into(), false, true)
        );
    }
    let mut observer = cluster.connect();
    assert!(served(&mut observer).contains(&"app_one".to_string()));
    connect_to(&cluster, "app_one").batch_execute("DROP EXTENSION pg_jobqueue").unwrap();
    wait_until("the worker of app_one leaves once the extension is gone", || {
        !served(&mut observer).contains(&"app_one".to_string())
    });
    assert!(served(&mut observer).contains(&"app_two".to_string()));
    // And comes back with the extension, with no restart.
    connect_to(&cluster, "app_one").batch_execute("CREATE EXTENSION pg_jobqueue").unwrap();
    wait_until("app_one is served again", || served(&mut observer).contains(&"app_one".to_string()));
}

/// `DROP DATABASE` of a database the worker serves succeeds at once, without WITH (FORCE), as on a
/// server without the library; so do a rename and a copy of it as a template. The renamed and
/// copied databases are served again.
#[test]
fn a_served_database_can_be_dropped_renamed_and_copied_at_once() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST]);
    let mut client = cluster.connect();
    new_database_with_work(&cluster, "doomed");
    wait_until("doomed is served", || served(&mut client).contains(&"doomed".to_string()));

    let took = Instant::now();
    client.batch_execute("ALTER DATABASE doomed RENAME TO renamed").unwrap();
    println!("rename of a served database took {:.3} s", took.elapsed().as_secs_f64());
    wait_until("the renamed database is served", || served(&mut client).contains(&"renamed".to_string()));

    let took = Instant::now();
    client.batch_execute("CREATE DATABASE copied TEMPLATE renamed").unwrap();
    println!("a copy of a served database took {:.3} s", took.elapsed().as_secs_f64());
    wait_until("the copy is served too", || served(&mut client).contains(&"copied".to_string()));
    let mut copy = connect_to(&cluster, "copied");
    wait_until("the copy's schedule ticks", || ticks(&mut copy) >= 2);
    drop(copy);

    for database in ["renamed", "copied"] {
        let took = Instant::now();
        client.batch_execute(&format!("DROP DATABASE {database}")).unwrap();
        println!("DROP DATABASE of a served database took {:.3} s", took.elapsed().as_secs_f64());
    }
    wait_until("no worker is left for the dropped databases", || {
        served(&mut client).iter().all(|db| db != "renamed" && db != "copied")
    });
    assert!(!cluster.log().contains("is being accessed by other users"));
}

/// The pid of the worker serving `database`, if one does.
fn worker_of(client: &mut Client, database: &str) -> Option<i32> {
    client
        .query_opt(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper' AND datname = $1",
            &[&database],
        )
        .unwrap()
        .map(|row| row.get(0))
}

/// Statements that need a database alone cost its maintenance nothing when PostgreSQL refuses
/// them: a role with no right on `postgres` runs `DROP DATABASE`, a rename, a move and a copy of
/// it, forty times, each refused with 42501, and the worker serving it is the same process
/// throughout. One that a superuser may run but that fails (another session is connected) makes
/// the worker leave for its duration only: with one worker for two databases, the slot stays
/// with `postgres`, and the database waiting for a worker does not take it.
#[test]
fn refused_and_failed_statements_leave_the_worker_where_it_was() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST, "pg_jobqueue.max_workers = 1"]);
    let mut client = cluster.connect();
    wait_until("postgres is served", || served(&mut client) == ["postgres"]);
    new_database_with_work(&cluster, "waiting");
    wait_until("waiting is logged as unserved", || cluster.log().contains("database waiting is not served"));
    client.batch_execute("CREATE ROLE nobody LOGIN").unwrap();
    client.batch_execute("CREATE DATABASE spare").unwrap();
    let worker = worker_of(&mut client, "postgres").expect("a worker serves postgres");

    let nobody_dsn = cluster.dsn().replace("dbname=postgres", "dbname=spare").replace("user=postgres", "user=nobody");
    let mut nobody = Client::connect(&nobody_dsn, postgres::NoTls).unwrap();
    for round in 0..10 {
        for statement in [
            "DROP DATABASE postgres",
            "ALTER DATABASE postgres RENAME TO taken",
            "ALTER DATABASE postgres SET TABLESPACE pg_default",
            "CREATE DATABASE copied TEMPLATE postgres",
        ] {
            assert_eq!(sqlstate(&mut nobody, statement).as_deref(), Some("42501"), "round {round}: {statement}");
        }
    }
    assert_eq!(worker_of(&mut client, "postgres"), Some(worker), "a refused statement moved the worker");
    assert_eq!(served(&mut client), ["postgres"]);

    // A superuser's DROP DATABASE that fails after its wait, as `client` is still connected.
    let superuser_dsn = cluster.dsn().replace("dbname=postgres", "dbname=spare");
    let mut superuser = Client::connect(&superuser_dsn, postgres::NoTls).unwrap();
    let took = Instant::now();
    assert_eq!(sqlstate(&mut superuser, "DROP DATABASE postgres").as_deref(), Some("55006"));
    println!("the failed DROP DATABASE took {:.1} s", took.elapsed().as_secs_f64());
    wait_until("postgres is served again", || served(&mut client).contains(&"postgres".to_string()));
    assert_eq!(served(&mut client), ["postgres"], "the waiting database took the slot of a held one");
}

/// What holds of one database can do to its maintenance is bounded: `DROP DATABASE` statements that
/// run and fail one after the other (another session stays connected) let its worker come back
/// and run a pass between two of them. A lease that expires while the first holds the database is
/// reaped before the second one ends, where back-to-back statements kept the worker away for good.
#[test]
fn failed_statements_one_after_the_other_let_a_pass_run_between_them() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST]);
    let mut client = cluster.connect();
    wait_until("postgres is served", || served(&mut client) == ["postgres"]);
    client.batch_execute("CREATE DATABASE spare").unwrap();
    client.batch_execute("SELECT jq_enqueue('held', '{}')").unwrap();
    let job: i64 = client.query_one("SELECT id FROM jq_claim('held', 'w', interval '300 ms')", &[]).unwrap().get(0);

    let superuser_dsn = cluster.dsn().replace("dbname=postgres", "dbname=spare");
    let mut superuser = Client::connect(&superuser_dsn, postgres::NoTls).unwrap();
    for attempt in 0..2 {
        // Each fails after PostgreSQL's own wait of 5 s for `client` to leave.
        assert_eq!(sqlstate(&mut superuser, "DROP DATABASE postgres").as_deref(), Some("55006"), "attempt {attempt}");
    }
    let row = client.query_one("SELECT status::text, last_error_code FROM jq_jobs WHERE id = $1", &[&job]).unwrap();
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, Option<String>>(1)),
        ("pending".to_owned(), Some("LEASE_EXPIRED".to_owned())),
        "the lease that expired during the first statement was not reaped before the second ended"
    );
}

/// With `max_workers = 2` and three databases with the extension, two are served, and the third
/// is logged once as unserved and maintained by its claims (`inline` in jq_maintenance). When one
/// served database is dropped, the third gets its worker.
#[test]
fn the_workers_are_bounded_and_an_unserved_database_is_logged_once() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST, "pg_jobqueue.max_workers = 2"]);
    let mut client = cluster.connect();
    for name in ["b_one", "b_two"] {
        new_database_with_work(&cluster, name);
    }
    // postgres has the extension too: three databases for two workers.
    wait_until("two databases are served", || served(&mut client).len() == 2);
    wait_until("the third is logged as unserved", || cluster.log().contains("is not served by a worker"));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(served(&mut client).len(), 2, "more workers than max_workers");
    assert_eq!(cluster.log().matches("is not served by a worker").count(), 1, "logged more than once");
    let all = ["postgres", "b_one", "b_two"];
    let unserved = *all.iter().find(|db| !served(&mut client).contains(&db.to_string())).unwrap();
    let row = connect_to(&cluster, unserved).query_one("SELECT served_by FROM jq_maintenance", &[]).unwrap();
    assert_eq!(row.get::<_, String>(0), "inline");

    let dropped = *all.iter().find(|db| **db != unserved && **db != "postgres").unwrap();
    client.batch_execute(&format!("DROP DATABASE {dropped}")).unwrap();
    wait_until("the unserved database gets the freed worker", || served(&mut client).contains(&unserved.to_string()));
}

/// `jq_maintenance`, `jq_metrics()` and `jq_queue_health` say when the worker stops maintaining the
/// database (turned off, with no claims to take over), and are fresh again once it is back.
#[test]
fn maintenance_goes_stale_when_the_worker_stops_and_fresh_again() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST]);
    let mut client = cluster.connect();
    client.query_one("SELECT jq_enqueue('watched', '{}')", &[]).unwrap();
    let stale = |client: &mut Client| -> (bool, bool, bool) {
        let view: bool = client.query_one("SELECT stale FROM jq_maintenance", &[]).unwrap().get(0);
        let health: bool = client
            .query_one("SELECT maintenance_stale FROM jq_queue_health WHERE queue_name = 'watched'", &[])
            .unwrap()
            .get(0);
        let metrics: String = client.query_one("SELECT jq_metrics()", &[]).unwrap().get(0);
        (view, health, metrics.contains("\njq_maintenance_stale 1\n"))
    };
    wait_until("the worker's passes are fresh", || stale(&mut client) == (false, false, false));
    client.batch_execute("ALTER SYSTEM SET pg_jobqueue.reaper_enabled = off").unwrap();
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    let off = Instant::now();
    wait_until("maintenance goes stale", || stale(&mut client) == (true, true, true));
    println!("stale {:.1} s after the worker was turned off", off.elapsed().as_secs_f64());
    // Turned off, the worker leaves the passes to claims, and none came.
    let served_by: String = client.query_one("SELECT served_by FROM jq_maintenance", &[]).unwrap().get(0);
    assert_eq!(served_by, "inline");
    client.batch_execute("ALTER SYSTEM SET pg_jobqueue.reaper_enabled = on").unwrap();
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_until("maintenance is fresh again", || stale(&mut client) == (false, false, false));
}

/// Without preload and without pg_cron, claims alone do what the worker would: an every-second
/// schedule ticks, a lease is reaped, old history is pruned and the day partitions are made, each
/// pass once per interval for the whole database however many sessions claim.
#[test]
fn without_preload_claims_tick_schedules_and_prune_history() {
    let cluster =
        Cluster::start_with(&["pg_jobqueue.prune_interval = '1s'", "pg_jobqueue.inline_reap_interval = '200ms'"]);
    let mut client = cluster.connect();
    client.query_one("SELECT jq_schedule('every-second', '* * * * * *', 'ticks', '{}')", &[]).unwrap();
    let old: i64 = client.query_one("SELECT jq_enqueue('done', '{}')", &[]).unwrap().get(0);
    let token: i64 = client.query_one("SELECT lease_token FROM jq_claim('done', 'w')", &[]).unwrap().get(0);
    client.query_one("SELECT jq_complete($1, 'w', $2)", &[&old, &token]).unwrap();
    client.execute("UPDATE jq_job_history SET finished_at = now() - interval '8 days' WHERE id = $1", &[&old]).unwrap();
    let abandoned: i64 = {
        client.query_one("SELECT jq_enqueue('work', '{}')", &[]).unwrap();
        client.query_one("SELECT id FROM jq_claim('work', 'crashed', interval '1 second')", &[]).unwrap().get(0)
    };
    let mut claimers: Vec<Client> = (0..3).map(|_| cluster.connect()).collect();
    let started = Instant::now();
    wait_until("claims alone tick, reap and prune", || {
        for claimer in &mut claimers {
            // Claims of another queue: nothing here calls jq_reap() or jq_prune().
            claimer.query("SELECT id FROM jq_claim('elsewhere', 'idle')", &[]).unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
        let pruned: bool = client.query_one("SELECT count(*) = 0 FROM jq_jobs WHERE id = $1", &[&old]).unwrap().get(0);
        ticks(&mut client) >= 3 && status(&mut client, abandoned) == "pending" && pruned
    });
    println!("claims alone ticked, reaped and pruned within {:.1} s", started.elapsed().as_secs_f64());
    let row = client
        .query_one(
            "SELECT served_by, last_tick_at IS NOT NULL, last_prune_at IS NOT NULL, last_partition_at IS NOT NULL, stale
             FROM jq_maintenance",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "inline");
    assert!(row.get::<_, bool>(1) && row.get::<_, bool>(2) && row.get::<_, bool>(3));
    assert!(!row.get::<_, bool>(4), "maintained by claims, yet stale");
    // Ticks once per second, however many sessions claimed: no tick twice.
    let doubled: i64 = client
        .query_one(
            "SELECT count(*) FROM (SELECT date_trunc('second', created_at) FROM jq_jobs WHERE queue_name = 'ticks'
                                   GROUP BY 1 HAVING count(*) > 1) d",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(doubled, 0);
    let partitions: i64 = client
        .query_one("SELECT count(*) FROM pg_inherits WHERE inhparent = 'jq_job_history'::regclass", &[])
        .unwrap()
        .get(0);
    assert!(partitions >= 3, "the coming days' partitions: {partitions}");
}

/// A claim inside a transaction block (here REPEATABLE READ) leaves the database's passes to claims
/// that are their own transactions: taking a pass another session marked since the transaction's
/// snapshot failed the claim with a serialization error (40001), for work that is not the claim's,
/// and a pass taken there would stay locked until the client commits.
#[test]
fn a_claim_in_repeatable_read_leaves_the_passes_to_others() {
    let cluster = Cluster::start_with(&["pg_jobqueue.inline_reap_interval = 0"]);
    let mut other = cluster.connect();
    let mut reader = cluster.connect();
    other.query_one("SELECT jq_enqueue('rr', '{}')", &[]).unwrap();
    reader.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1").unwrap();
    // Another session's claim takes the due passes and commits after the snapshot was taken.
    other.query("SELECT id FROM jq_claim('elsewhere', 'w')", &[]).unwrap();
    let claimed = reader.query("SELECT id FROM jq_claim('rr', 'w')", &[]).expect("the claim in REPEATABLE READ");
    assert_eq!(claimed.len(), 1);
    reader.batch_execute("COMMIT").unwrap();
}
