//! Waiting for a job (guide, "Results and waiting"): jq_await is woken by the commit that finishes
//! the job (completion, death, cancellation), through shared memory when the library is preloaded
//! and by polling otherwise; it holds no snapshot horizon while it sleeps, and cancellation and
//! statement_timeout end it at once. The wake-up latency is printed, never asserted.

use std::thread;
use std::time::Instant;

use jq_harness::{wait_until, Client, Cluster};
use postgres::error::SqlState;

const PRELOAD: &str = "shared_preload_libraries = 'pg_jobqueue'";

/// A session that runs one jq_await on a thread; the result is the status it returned, if any.
/// Rechecks are an hour apart and statement_timeout is 100 s, shorter than the four-minute wait: a
/// wake-up that never comes fails the test (57014) rather than the wait's end returning.
fn awaiting(cluster: &Cluster, job: i64) -> thread::JoinHandle<Result<Option<String>, postgres::Error>> {
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SET application_name = 'awaiter'; SET pg_jobqueue.wait_recheck = '1h'; SET statement_timeout = '100s'",
        )
        .unwrap();
    thread::spawn(move || {
        let row = client.query_opt("SELECT status::text FROM jq_await($1, interval '4 min')", &[&job])?;
        Ok(row.map(|r| r.get(0)))
    })
}

/// Waits until the awaiting session sleeps; returns whether it holds no snapshot horizon then.
fn sleeping(client: &mut Client) -> bool {
    let mut released = false;
    wait_until("jq_await sleeps", || {
        let row = client
            .query_opt(
                "SELECT backend_xmin IS NULL AND backend_xid IS NULL FROM pg_stat_activity
                 WHERE application_name = 'awaiter' AND wait_event_type = 'Extension'",
                &[],
            )
            .unwrap();
        row.map(|r| released = r.get(0)).is_some()
    });
    released
}

fn claimed(client: &mut Client, queue: &str) -> (i64, i64) {
    let row = client.query_one("SELECT id, lease_token FROM jq_claim($1, 'w')", &[&queue]).unwrap();
    (row.get(0), row.get(1))
}

#[test]
fn await_is_woken_by_the_completion_holding_no_snapshot_while_it_sleeps() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut worker = cluster.connect();
    let id: i64 = worker.query_one("SELECT jq_enqueue('r', '{}')", &[]).unwrap().get(0);
    let started = Instant::now();
    let waiter = awaiting(&cluster, id);
    assert!(sleeping(&mut worker), "the sleeping jq_await holds back VACUUM");

    // A claim and a completion that rolls back finish nothing: it sleeps on.
    let (_, token) = claimed(&mut worker, "r");
    worker.batch_execute(&format!("BEGIN; SELECT jq_complete({id}, 'w', {token}); ROLLBACK")).unwrap();
    sleeping(&mut worker);
    assert!(!waiter.is_finished());

    let completed = Instant::now();
    worker.execute("SELECT jq_complete($1, 'w', $2, result => '{\"ok\": true}')", &[&id, &token]).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap().as_deref(), Some("succeeded"));
    eprintln!(
        "jq_await returned {:?} after the completion committed, {:?} after it began",
        completed.elapsed(),
        started.elapsed()
    );
}

/// A queue that keeps nothing (guide, "Queues that keep nothing"): the completion deletes the job,
/// and a jq_await that saw it running answers at once that it succeeded, with no result. One that
/// begins after the completion finds no job, as for a pruned one.
#[test]
fn await_of_a_job_that_its_queue_keeps_nothing_of_answers_succeeded_without_a_result() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut worker = cluster.connect();
    worker.query_one("SELECT jq_configure('gone', '{\"keep_succeeded\": false}')", &[]).unwrap();
    let id: i64 = worker.query_one("SELECT jq_enqueue('gone', '{}')", &[]).unwrap().get(0);
    let (_, token) = claimed(&mut worker, "gone");
    let mut client = cluster.connect();
    client.batch_execute("SET application_name = 'awaiter'").unwrap();
    let waiter = thread::spawn(move || {
        client
            .query_one("SELECT status::text, result IS NULL FROM jq_await($1, interval '4 min')", &[&id])
            .map(|row| (row.get::<_, String>(0), row.get::<_, bool>(1)))
    });
    sleeping(&mut worker);
    worker.execute("SELECT jq_complete($1, 'w', $2, result => '{\"ok\": true}')", &[&id, &token]).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), ("succeeded".to_string(), true));
    let rows = worker.query("SELECT * FROM jq_await($1, interval '1 s')", &[&id]).unwrap();
    assert!(rows.is_empty(), "a job already gone is one that does not exist");
}

/// guide, "Queues that keep nothing": what becomes of a succeeded job is its queue's setting at
/// the completion, whichever session completes it. The session that claimed a job completes it by
/// the statement made for the job's queue; another session, or one that claimed it before the
/// setting changed, must come to the same end. A job that failed once has an event, which goes
/// with a job that is not kept.
#[test]
fn a_succeeded_job_is_kept_or_forgotten_by_its_queues_setting_at_the_completion() {
    let cluster = Cluster::start();
    let mut worker = cluster.connect();
    let mut other = cluster.connect();
    worker
        .batch_execute(
            r#"SELECT jq_configure('gone', '{"keep_succeeded": false, "backoff_base": "1 ms", "backoff_cap": "1 ms"}');
               SELECT jq_configure('kept', '{"backoff_base": "1 ms", "backoff_cap": "1 ms"}');
               SELECT jq_configure('flip', '{"backoff_base": "1 ms", "backoff_cap": "1 ms"}');"#,
        )
        .unwrap();
    // Each job fails once (its event), and is claimed again by `worker`.
    let held = |worker: &mut Client, queue: &str| {
        let id: i64 = worker.query_one("SELECT jq_enqueue($1, '{}')", &[&queue]).unwrap().get(0);
        let (first, token) = claimed(worker, queue);
        assert_eq!(first, id);
        worker.execute("SELECT jq_fail($1, 'w', $2, 'E')", &[&id, &token]).unwrap();
        wait_until("the retry is due", || {
            worker.query("SELECT 1 FROM jq_jobs WHERE id = $1 AND available_at <= now()", &[&id]).unwrap().len() == 1
        });
        claimed(worker, queue)
    };
    let left = |client: &mut Client, id: i64| -> (i64, i64) {
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM jq_jobs WHERE id = $1 AND status = 'succeeded'),
                        (SELECT count(*) FROM jq_job_events WHERE job_id = $1)",
                &[&id],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    let complete = |client: &mut Client, (id, token): (i64, i64)| {
        assert!(client.query_one("SELECT jq_complete($1, 'w', $2)", &[&id, &token]).unwrap().get::<_, bool>(0));
    };

    // Completed by the session that claimed them, and by another.
    for by_claimer in [true, false] {
        let gone = held(&mut worker, "gone");
        let kept = held(&mut worker, "kept");
        let completer = if by_claimer { &mut worker } else { &mut other };
        complete(completer, gone);
        complete(completer, kept);
        assert_eq!(left(&mut other, gone.0), (0, 0), "forgotten, by the claimer: {by_claimer}");
        assert_eq!(left(&mut other, kept.0), (1, 1), "kept, by the claimer: {by_claimer}");
    }

    // In batches, by the claimer and by another session; a batch of one queue that keeps nothing
    // with a job of it that others depend on, which is kept all the same.
    for by_claimer in [true, false] {
        let gone = [held(&mut worker, "gone"), held(&mut worker, "gone")];
        let kept = [held(&mut worker, "kept"), held(&mut worker, "kept")];
        let completer = if by_claimer { &mut worker } else { &mut other };
        for jobs in [gone, kept] {
            let (ids, tokens): (Vec<i64>, Vec<i64>) = jobs.iter().copied().unzip();
            let completed = completer.query("SELECT * FROM jq_complete_batch($1, 'w', $2)", &[&ids, &tokens]).unwrap();
            assert_eq!(completed.len(), 2);
        }
        for (id, _) in gone {
            assert_eq!(left(&mut other, id), (0, 0), "forgotten in a batch, by the claimer: {by_claimer}");
        }
        for (id, _) in kept {
            assert_eq!(left(&mut other, id), (1, 1), "kept in a batch, by the claimer: {by_claimer}");
        }
    }
    let parent = held(&mut worker, "gone");
    let plain = held(&mut worker, "gone");
    worker.query_one("SELECT jq_enqueue('after', '{}', depends_on => ARRAY[$1::bigint])", &[&parent.0]).unwrap();
    let completed = worker
        .query("SELECT * FROM jq_complete_batch($1, 'w', $2)", &[&vec![parent.0, plain.0], &vec![parent.1, plain.1]])
        .unwrap();
    assert_eq!(completed.len(), 2);
    assert_eq!(left(&mut other, parent.0), (1, 1), "a job others depend on is kept");
    assert_eq!(left(&mut other, plain.0), (0, 0));

    // The setting changes (in another session) between the claim and the completion.
    let flipped = held(&mut worker, "flip");
    other.batch_execute(r#"SELECT jq_configure('flip', '{"keep_succeeded": false}')"#).unwrap();
    complete(&mut worker, flipped);
    assert_eq!(left(&mut other, flipped.0), (0, 0), "forgotten after the change");
    let flipped = held(&mut worker, "flip");
    other.batch_execute(r#"SELECT jq_configure('flip', '{"keep_succeeded": true}')"#).unwrap();
    complete(&mut worker, flipped);
    assert_eq!(left(&mut other, flipped.0), (1, 1), "kept after the change back");
}

#[test]
fn await_is_woken_when_the_job_dies_or_is_cancelled() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut client = cluster.connect();
    let doomed: i64 = client.query_one("SELECT jq_enqueue('r', '{}', max_attempts => 1)", &[]).unwrap().get(0);
    let waiter = awaiting(&cluster, doomed);
    sleeping(&mut client);
    let (_, token) = claimed(&mut client, "r");
    client.execute("SELECT jq_fail($1, 'w', $2, 'BROKEN', retryable => false)", &[&doomed, &token]).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap().as_deref(), Some("dead"));

    let dropped: i64 = client.query_one("SELECT jq_enqueue('r', '{}')", &[]).unwrap().get(0);
    let waiter = awaiting(&cluster, dropped);
    sleeping(&mut client);
    client.execute("SELECT jq_cancel($1)", &[&dropped]).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap().as_deref(), Some("cancelled"));
}

#[test]
fn await_is_woken_when_the_reaper_lets_a_spent_job_die() {
    let cluster = Cluster::start_with(&[PRELOAD, "pg_jobqueue.reaper_interval = '100ms'"]);
    let mut client = cluster.connect();
    let id: i64 = client.query_one("SELECT jq_enqueue('r', '{}', max_attempts => 1)", &[]).unwrap().get(0);
    client.query_one("SELECT id FROM jq_claim('r', 'w', interval '1 second')", &[]).unwrap();
    assert_eq!(awaiting(&cluster, id).join().unwrap().unwrap().as_deref(), Some("dead"));
}

#[test]
fn statement_timeout_and_cancellation_end_await() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut client = cluster.connect();
    let id: i64 = client.query_one("SELECT jq_enqueue('r', '{}')", &[]).unwrap().get(0);
    client.batch_execute("SET statement_timeout = '300ms'").unwrap();
    let error = client.query("SELECT * FROM jq_await($1, interval '4 min')", &[&id]).unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::QUERY_CANCELED), "{error}");

    let waiter = awaiting(&cluster, id);
    let mut admin = cluster.connect();
    sleeping(&mut admin);
    admin
        .batch_execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'awaiter'")
        .unwrap();
    let error = waiter.join().unwrap().unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::QUERY_CANCELED), "{error}");
    // The cancelled session left the count of waiters: a completion now still wakes a new one.
    let waiter = awaiting(&cluster, id);
    sleeping(&mut admin);
    let (_, token) = claimed(&mut admin, "r");
    admin.execute("SELECT jq_complete($1, 'w', $2)", &[&id, &token]).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap().as_deref(), Some("succeeded"));
}

#[test]
fn without_preload_await_polls() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let id: i64 = client.query_one("SELECT jq_enqueue('r', '{}')", &[]).unwrap().get(0);
    let waiter = {
        let mut c = cluster.connect();
        thread::spawn(move || {
            c.query_opt("SELECT status::text FROM jq_await($1, interval '1 min')", &[&id])
                .unwrap()
                .map(|r| r.get::<_, String>(0))
        })
    };
    let (_, token) = claimed(&mut client, "r");
    client.execute("SELECT jq_complete($1, 'w', $2)", &[&id, &token]).unwrap();
    assert_eq!(waiter.join().unwrap().as_deref(), Some("succeeded"));
}

/// A completion whose statement ran before jq_await began, and whose transaction commits while it
/// sleeps, still wakes it: whether anyone waits is asked at the commit.
#[test]
fn await_is_woken_by_a_completion_made_before_it_began_and_committed_while_it_sleeps() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut worker = cluster.connect();
    let id: i64 = worker.query_one("SELECT jq_enqueue('r', '{}')", &[]).unwrap().get(0);
    let (_, token) = claimed(&mut worker, "r");
    worker.batch_execute(&format!("BEGIN; SELECT jq_complete({id}, 'w', {token})")).unwrap();
    let waiter = awaiting(&cluster, id);
    let mut admin = cluster.connect();
    sleeping(&mut admin);
    worker.batch_execute("COMMIT").unwrap();
    // Rechecks are an hour apart: only the commit's wake-up ends the four-minute wait.
    assert_eq!(waiter.join().unwrap().unwrap().as_deref(), Some("succeeded"));
}
