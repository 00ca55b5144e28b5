//! Reaping three ways: the background worker (preloaded), pg_cron, and no scheduler at all. Each test
//! starts its own server, since preloading needs a server start. Durations are reported, not
//! asserted: the tests wait for states.

use std::time::{Duration, Instant};

use jq_harness::client::{connect_as, status};
use jq_harness::{wait_until, wait_until_within, Client, Cluster};

const PRELOADED: &str = "shared_preload_libraries = 'pg_jobqueue'";
const FAST_REAPER: &str = "pg_jobqueue.reaper_interval = '200ms'";

/// Claims one job of `queue` with a one-second lease and abandons it, as a crashed worker would.
/// Returns the job id.
fn abandon_a_job(client: &mut Client, queue: &str) -> i64 {
    client.query_one("SELECT jq_enqueue($1, '{}')", &[&queue]).unwrap();
    client.query_one("SELECT id FROM jq_claim($1, 'crashed-worker', interval '1 second')", &[&queue]).unwrap().get(0)
}

fn reaper_pid(client: &mut Client) -> Option<i32> {
    client
        .query_opt("SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper'", &[])
        .unwrap()
        .map(|row| row.get(0))
}

/// Seconds from a job's lease expiry to its lease_expired event.
fn reap_latency(client: &mut Client, id: i64) -> f64 {
    client
        .query_one(
            "SELECT extract(epoch FROM e.at - (j.claimed_at + interval '1 second'))::float8
             FROM jq_job_events e JOIN jq_jobs j ON j.id = e.job_id
             WHERE e.job_id = $1 AND e.event = 'lease_expired'",
            &[&id],
        )
        .unwrap()
        .get(0)
}

/// The worker starts before the extension exists (that database is skipped quietly), then reaps an
/// abandoned lease with nobody calling jq_reap() and no claims that could recover it inline, and
/// runs retention.
#[test]
fn the_background_reaper_reaps_with_nobody_calling_jq_reap() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST_REAPER, "pg_jobqueue.prune_interval = '1s'"]);
    let mut client = cluster.connect();
    wait_until("the reaper shows in pg_stat_activity", || reaper_pid(&mut client).is_some());
    let id = abandon_a_job(&mut client, "bg");
    wait_until("the background reaper has reaped the lease", || status(&mut client, id) != "running");
    assert_eq!(status(&mut client, id), "pending");
    println!(
        "background reaper (interval 200 ms): lease reaped {:.3} s after it expired",
        reap_latency(&mut client, id)
    );

    let old: i64 = client.query_one("SELECT jq_enqueue('bg', '{}', priority => 9)", &[]).unwrap().get(0);
    let token: i64 = client.query_one("SELECT lease_token FROM jq_claim('bg', 'w')", &[]).unwrap().get(0);
    client.query_one("SELECT jq_complete($1, 'w', $2)", &[&old, &token]).unwrap();
    client.execute("UPDATE jq_job_history SET finished_at = now() - interval '8 days' WHERE id = $1", &[&old]).unwrap();
    wait_until("the retention pass has deleted the old job", || {
        client.query_one("SELECT count(*) = 0 FROM jq_jobs WHERE id = $1", &[&old]).unwrap().get(0)
    });

    let log = cluster.log();
    assert!(log.contains("pg_jobqueue reaper: reaped 1 expired lease(s) in database postgres"), "{log}");
    assert!(log.contains("pg_jobqueue reaper: pruned 1 finished job(s) in database postgres"), "{log}");
    assert!(!log.contains("pass failed"), "a pass failed: {log}");
}

/// A pass that errors is logged and the same worker goes on; after pg_terminate_backend() the
/// postmaster starts it again, and the new worker reaps too.
#[test]
fn the_reaper_survives_a_failing_pass_and_returns_after_termination() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST_REAPER]);
    let mut client = cluster.connect();
    wait_until("the reaper is up", || reaper_pid(&mut client).is_some());
    let first_pid = reaper_pid(&mut client).unwrap();

    client
        .batch_execute(
            "CREATE FUNCTION refuse_reap() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN RAISE EXCEPTION 'this job refuses to be reaped'; END $$;
             CREATE TRIGGER refuse_reap BEFORE UPDATE ON jq_live_jobs FOR EACH ROW
             WHEN (NEW.last_error_code = 'LEASE_EXPIRED') EXECUTE FUNCTION refuse_reap();",
        )
        .unwrap();
    let id = abandon_a_job(&mut client, "poison");
    wait_until("a failing pass is logged", || cluster.log().contains("this job refuses to be reaped"));
    assert_eq!(status(&mut client, id), "running");
    client.batch_execute("DROP TRIGGER refuse_reap ON jq_live_jobs").unwrap();
    wait_until("the lease is reaped once the pass can succeed", || status(&mut client, id) == "pending");
    assert_eq!(reaper_pid(&mut client), Some(first_pid), "the worker restarted instead of carrying on");

    let terminated: bool = client.query_one("SELECT pg_terminate_backend($1)", &[&first_pid]).unwrap().get(0);
    assert!(terminated);
    wait_until("a new reaper has started", || matches!(reaper_pid(&mut client), Some(pid) if pid != first_pid));
    let id = abandon_a_job(&mut client, "after-restart");
    wait_until("the restarted reaper reaps", || status(&mut client, id) == "pending");
}

/// `DROP EXTENSION` while the worker makes its first pass in the database (it makes the day
/// partitions of history), twenty times, each drop a millisecond later after the worker came than
/// the one before: none fails. Each waits in the server, polling every millisecond, since the pass
/// takes some tens of them. A pass that locked the extension's tables without holding the extension
/// first deadlocked with such a drop (40P01) about one time in three.
#[test]
fn drop_extension_during_the_workers_passes_never_deadlocks() {
    let cluster = Cluster::start_without_extension(&[PRELOADED, FAST_REAPER]);
    cluster.connect().batch_execute("CREATE DATABASE dropped").unwrap();
    let mut client = connect_as(&cluster, "dropped", "postgres");
    // A worker that never comes (or never leaves) fails the wait below rather than hanging.
    client.batch_execute("SET statement_timeout = '60s'").unwrap();
    let worker_is = |there: bool| {
        format!(
            "DO $$ BEGIN LOOP PERFORM pg_stat_clear_snapshot();
                 EXIT WHEN {} EXISTS (SELECT FROM pg_stat_activity
                                      WHERE datname = 'dropped' AND backend_type = 'pg_jobqueue reaper');
                 PERFORM pg_sleep(0.001);
             END LOOP; END $$",
            if there { "" } else { "NOT" }
        )
    };
    let mut failed = Vec::new();
    for delay_ms in 0..20 {
        client.batch_execute(&worker_is(false)).unwrap();
        client.batch_execute("CREATE EXTENSION pg_jobqueue").unwrap();
        client.batch_execute(&worker_is(true)).unwrap();
        client.batch_execute(&format!("SELECT pg_sleep({delay_ms} / 1000.0)")).unwrap();
        if let Err(e) = client.batch_execute("DROP EXTENSION pg_jobqueue CASCADE") {
            let message = e.as_db_error().map_or(e.to_string(), |d| d.message().to_owned());
            failed.push(format!("{delay_ms} ms after the worker came: {message}"));
            // Dropped all the same for the next round, which may take tries on a broken build.
            wait_until("the extension is dropped", || {
                client.batch_execute("DROP EXTENSION pg_jobqueue CASCADE").is_ok()
            });
        }
    }
    assert!(failed.is_empty(), "drops that failed: {failed:#?}");
}

/// A fast shutdown with the worker running completes (the worker and its launcher leave on
/// SIGTERM): `Cluster::stop` fails when `pg_ctl stop -m fast` gives up waiting for them.
#[test]
fn a_fast_shutdown_with_the_reaper_running_is_prompt() {
    let cluster = Cluster::start_with(&[PRELOADED, "pg_jobqueue.reaper_interval = '10s'"]);
    let mut client = cluster.connect();
    wait_until("the reaper is up", || reaper_pid(&mut client).is_some());
    drop(client);
    let took = cluster.stop();
    println!("fast shutdown with the reaper running took {:.2} s", took.as_secs_f64());
}

/// No preload and no pg_cron: a worker dies holding a job, and a second worker's claims recover it.
#[test]
fn with_no_reaper_a_second_workers_claims_recover_the_job() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let id = abandon_a_job(&mut client, "alone");
    let started = Instant::now();
    let mut recovered = None;
    wait_until("the second worker claims the abandoned job", || {
        recovered = client
            .query_opt("SELECT id, lease_token FROM jq_claim('alone', 'second-worker', interval '1 minute')", &[])
            .unwrap()
            .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1)));
        if recovered.is_none() {
            std::thread::sleep(Duration::from_millis(100));
        }
        recovered.is_some()
    });
    let (claimed, token) = recovered.unwrap();
    assert_eq!(claimed, id);
    assert_eq!(token, 2);
    let done: bool = client.query_one("SELECT jq_complete($1, 'second-worker', 2)", &[&id]).unwrap().get(0);
    assert!(done);
    println!(
        "inline recovery: job reclaimed {:.2} s after it was abandoned with a 1 s lease",
        started.elapsed().as_secs_f64()
    );
}

/// pg_cron (Debian's 1.4.2 runs a job at most once a minute) schedules jq_reap() and jq_prune().
#[test]
fn pg_cron_schedules_the_reaper() {
    let cluster = Cluster::start_with(&["shared_preload_libraries = 'pg_cron'", "cron.database_name = 'postgres'"]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SET pg_jobqueue.inline_reap_max = 0;
             CREATE EXTENSION pg_cron;
             SELECT cron.schedule('jq-reap', '* * * * *', 'SELECT jq_reap()');
             SELECT cron.schedule('jq-prune', '* * * * *', 'SELECT jq_prune()');",
        )
        .unwrap();
    let id = abandon_a_job(&mut client, "cron");
    wait_until_within("pg_cron has run jq_reap()", Duration::from_secs(150), || status(&mut client, id) == "pending");
    // pg_cron commits the job's own transaction first and records the run's outcome after it.
    wait_until("pg_cron has recorded the run as succeeded", || {
        client
            .query_one(
                "SELECT count(*) > 0 FROM cron.job_run_details WHERE command = 'SELECT jq_reap()' AND status = 'succeeded'",
                &[],
            )
            .unwrap()
            .get(0)
    });
}
