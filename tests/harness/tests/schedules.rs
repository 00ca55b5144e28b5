//! Schedules on a live server (guide, "Schedules"): the background worker makes the ticks; ticks
//! missed while the server was down are caught up as each schedule's policy says; the reaper's
//! expiry sweep ends jobs not claimed before their deadline. Durations are printed, never asserted.

use std::time::Duration;

use jq_harness::{text_rows, wait_until, Cluster};

const PRELOAD: &str = "shared_preload_libraries = 'pg_jobqueue'";

#[test]
fn the_background_worker_makes_the_ticks_and_catches_up_after_the_server_was_down() {
    let cluster = Cluster::start_with(&[PRELOAD, "pg_jobqueue.reaper_interval = '200ms'"]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SELECT jq_schedule('each', '* * * * * *', 'each', '{}', catch_up => 'each', catch_up_limit => 100);
             SELECT jq_schedule('once', '* * * * * *', 'once', '{}', catch_up => 'once');
             SELECT jq_schedule('skip', '0 0 1 1 *', 'skip', '{}', catch_up => 'skip')",
        )
        .unwrap();
    let count = |client: &mut jq_harness::Client, queue: &str| -> i64 {
        client.query_one("SELECT count(*) FROM jq_jobs WHERE queue_name = $1", &[&queue]).unwrap().get(0)
    };
    wait_until("the worker makes ticks", || count(&mut client, "each") >= 2);
    // The yearly schedule's tick is put a minute into the past: it is missed, as if the server had
    // been down at midnight on New Year's Day.
    client
        .batch_execute(
            "UPDATE jq_schedule_specs SET next_run = clock_timestamp() - interval '1 minute' WHERE name = 'skip'",
        )
        .unwrap();
    drop(client);

    cluster.restart_after(Duration::from_secs(4));
    let mut client = cluster.connect();
    let gap = |client: &mut jq_harness::Client, queue: &str| -> i64 {
        client
            .query_one(
                "SELECT coalesce(max(d), 0)::bigint FROM (
                     SELECT extract(epoch FROM available_at - lag(available_at) OVER (ORDER BY available_at)) AS d
                     FROM jq_jobs WHERE queue_name = $1) t",
                &[&queue],
            )
            .unwrap()
            .get(0)
    };
    let before_once = count(&mut client, "once");
    wait_until("the worker catches up", || {
        client
            .query_one("SELECT bool_and(next_run > clock_timestamp()) FROM jq_schedule_specs WHERE NOT paused", &[])
            .unwrap()
            .get::<_, bool>(0)
            && count(&mut client, "once") > before_once
    });
    // 'each' made a job for every second the server was down: no gap of more than a second.
    assert_eq!(gap(&mut client, "each"), 1, "each: a job per missed tick");
    assert!(gap(&mut client, "once") >= 4, "once: one job for the missed ticks, not one each");
    assert_eq!(count(&mut client, "skip"), 0, "skip: the missed tick was dropped");
    let distinct: Vec<String> = text_rows(
        &mut client,
        "SELECT (count(*) = count(DISTINCT available_at))::text FROM jq_jobs WHERE queue_name = 'each'",
    );
    assert_eq!(distinct, ["true"], "a tick was made twice");
}

#[test]
fn the_reaper_cancels_jobs_not_claimed_before_they_expire() {
    let cluster = Cluster::start_with(&[PRELOAD, "pg_jobqueue.reaper_interval = '100ms'"]);
    let mut client = cluster.connect();
    let id: i64 = client
        .query_one("SELECT jq_enqueue('late', '{}', expires_at => clock_timestamp() + interval '300 ms')", &[])
        .unwrap()
        .get(0);
    let kept: i64 = client
        .query_one("SELECT jq_enqueue('late', '{}', expires_at => clock_timestamp() + interval '1 hour')", &[])
        .unwrap()
        .get(0);
    wait_until("the expired job is cancelled", || {
        client.query_one("SELECT status::text FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get::<_, String>(0)
            == "cancelled"
    });
    let row = client
        .query_one(
            "SELECT last_error_code, (SELECT count(*) FROM jq_job_events WHERE job_id = $1 AND event = 'cancelled'
                                      AND error_code = 'EXPIRED')
             FROM jq_jobs WHERE id = $1",
            &[&id],
        )
        .unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, i64>(1)), ("EXPIRED".to_owned(), 1));
    let claimed: i64 = client.query_one("SELECT id FROM jq_claim('late', 'w')", &[]).unwrap().get(0);
    assert_eq!(claimed, kept, "the job that had not expired is still claimed");
}
