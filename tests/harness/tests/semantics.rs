//! Queue semantics under concurrency: dedup races, per-key ordering, the concurrency limit and
//! fairness, each with several real sessions.
//!
//! Workers log `start` after their claim commits and `end` in the same transaction as their
//! completion, numbered by a sequence. For any job that really ran after another finished,
//! end(first) < start(second) in that numbering, so the log gives an exact order to check.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use jq_harness::{wait_until, Client, Cluster};

const RUN_LOG: &str = "CREATE TABLE run_log (seq bigserial PRIMARY KEY, job_id bigint, key text, event text)";

/// Claims and completes jobs of `queue` until none is pending or running, logging each run.
fn logging_worker(mut client: Client, queue: &'static str, worker: String, work: Duration) {
    loop {
        let claimed = client
            .query_opt(
                "SELECT id, payload->>'key', lease_token FROM jq_claim($1, $2, interval '1 minute')",
                &[&queue, &worker],
            )
            .unwrap();
        let Some(row) = claimed else {
            let live: bool = client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM jq_jobs WHERE queue_name = $1 AND status IN ('pending', 'running'))",
                    &[&queue],
                )
                .unwrap()
                .get(0);
            if !live {
                return;
            }
            thread::sleep(Duration::from_millis(2));
            continue;
        };
        let (id, key, token): (i64, Option<String>, i64) = (row.get(0), row.get(1), row.get(2));
        client.execute("INSERT INTO run_log (job_id, key, event) VALUES ($1, $2, 'start')", &[&id, &key]).unwrap();
        thread::sleep(work);
        let mut tx = client.transaction().unwrap();
        tx.execute("INSERT INTO run_log (job_id, key, event) VALUES ($1, $2, 'end')", &[&id, &key]).unwrap();
        let done: bool = tx.query_one("SELECT jq_complete($1, $2, $3)", &[&id, &worker, &token]).unwrap().get(0);
        assert!(done, "job {id}: the completion was refused");
        tx.commit().unwrap();
    }
}

fn run_workers(cluster: &Cluster, queue: &'static str, workers: usize, work: Duration) {
    let handles: Vec<_> = (0..workers)
        .map(|w| {
            let client = cluster.connect();
            thread::spawn(move || logging_worker(client, queue, format!("worker-{w}"), work))
        })
        .collect();
    for handle in handles {
        handle.join().expect("worker thread");
    }
}

/// The run log in sequence order: (job_id, key, event).
fn run_log(client: &mut Client) -> Vec<(i64, Option<String>, String)> {
    client
        .query("SELECT job_id, key, event FROM run_log ORDER BY seq", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// Eight sessions enqueue the same dedup key at the same moment, over and over: every call gets the
/// same id back, and exactly one job exists.
#[test]
fn concurrent_enqueues_of_one_dedup_key_make_one_job() {
    let cluster = Cluster::start();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let mut client = cluster.connect();
            thread::spawn(move || {
                (0..50)
                    .map(|_| {
                        client
                            .query_one("SELECT jq_enqueue('d', '{}', dedup_key => 'same')", &[])
                            .unwrap()
                            .get::<_, i64>(0)
                    })
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let ids: Vec<i64> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
    assert!(ids.iter().all(|&id| id == ids[0]), "different ids for one live dedup key");
    let jobs: i64 = cluster.connect().query_one("SELECT count(*) FROM jq_jobs", &[]).unwrap().get(0);
    assert_eq!(jobs, 1);
}

/// The dedup race at its sharpest: B enqueues the key while A's insert of it is not yet committed.
/// B waits for A and then returns A's job; had A rolled back, B would have inserted its own.
#[test]
fn a_dedup_enqueue_waits_for_an_uncommitted_one_and_returns_its_id() {
    let cluster = Cluster::start();
    let (mut a, mut b, mut observer) = (cluster.connect(), cluster.connect(), cluster.connect());
    for commit in [true, false] {
        let key = format!("k-{commit}");
        let b_pid: i32 = b.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
        let mut tx = a.transaction().unwrap();
        let a_id: i64 = tx.query_one("SELECT jq_enqueue('d', '{}', dedup_key => $1)", &[&key]).unwrap().get(0);
        let b_key = key.clone();
        let b_call = thread::spawn(move || {
            let id: i64 = b.query_one("SELECT jq_enqueue('d', '{}', dedup_key => $1)", &[&b_key]).unwrap().get(0);
            (b, id)
        });
        wait_until("B waits on A's uncommitted insert", || {
            observer
                .query_one(
                    "SELECT wait_event_type IS NOT DISTINCT FROM 'Lock' FROM pg_stat_activity WHERE pid = $1",
                    &[&b_pid],
                )
                .unwrap()
                .get(0)
        });
        if commit {
            tx.commit().unwrap();
        } else {
            tx.rollback().unwrap();
        }
        let (returned_b, b_id) = b_call.join().unwrap();
        b = returned_b;
        if commit {
            assert_eq!(b_id, a_id, "B must return the job A committed");
        } else {
            assert_ne!(b_id, a_id, "A rolled back: B inserts its own job");
        }
        let live: i64 =
            observer.query_one("SELECT count(*) FROM jq_jobs WHERE dedup_key = $1", &[&key]).unwrap().get(0);
        assert_eq!(live, 1);
    }
}

/// Eight claimers, 50 ordering keys of 20 jobs each: no two jobs of a key ever run at once, and each
/// key's jobs run in id order.
#[test]
fn ordering_keys_run_one_at_a_time_in_id_order_under_eight_claimers() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute(RUN_LOG).unwrap();
    client
        .batch_execute(
            "SELECT jq_enqueue('ordered', jsonb_build_object('key', 'k' || (i % 50)), ordering_key => 'k' || (i % 50))
             FROM generate_series(1, 1000) i",
        )
        .unwrap();
    run_workers(&cluster, "ordered", 8, Duration::from_millis(1));

    let mut by_key: HashMap<String, Vec<(i64, String)>> = HashMap::new();
    for (id, key, event) in run_log(&mut client) {
        by_key.entry(key.unwrap()).or_default().push((id, event));
    }
    assert_eq!(by_key.len(), 50);
    for (key, events) in by_key {
        assert_eq!(events.len(), 40, "key {key}: every job runs once");
        for (i, pair) in events.chunks(2).enumerate() {
            assert_eq!(pair[0].1, "start", "key {key}: a job started while another ran");
            assert_eq!(pair[1], (pair[0].0, "end".to_string()), "key {key}: two jobs overlapped");
            if i > 0 {
                assert!(pair[0].0 > events[2 * i - 2].0, "key {key}: out of id order");
            }
        }
    }
}

/// A session keeps a queue's settings (guide, "jq_configure"): a change made in another session,
/// by jq_configure, jq_configure_key or an UPDATE of jq_queues or jq_key_settings, applies from its
/// next claim; so does the queue's first job with an ordering key, whose check its claims then
/// take in.
#[test]
fn a_sessions_kept_settings_follow_every_change_made_elsewhere() {
    let cluster = Cluster::start();
    let mut worker = cluster.connect();
    let mut admin = cluster.connect();
    admin.batch_execute("SELECT jq_enqueue('kept', '{}') FROM generate_series(1, 10)").unwrap();
    let claim = |client: &mut Client, batch: i32| -> Vec<i64> {
        let rows = client.query("SELECT id FROM jq_claim('kept', 'w', batch_size => $1)", &[&batch]).unwrap();
        rows.iter().map(|row| row.get(0)).collect()
    };
    assert_eq!(claim(&mut worker, 1).len(), 1, "the worker's session now keeps the settings");
    admin.batch_execute("SELECT jq_configure('kept', '{\"paused\": true}')").unwrap();
    assert_eq!(claim(&mut worker, 1).len(), 0, "paused by jq_configure");
    admin.batch_execute("UPDATE jq_queues SET paused = false WHERE queue_name = 'kept'").unwrap();
    assert_eq!(claim(&mut worker, 1).len(), 1, "resumed by an UPDATE");
    admin.batch_execute("UPDATE jq_queues SET concurrency_limit = 3 WHERE queue_name = 'kept'").unwrap();
    assert_eq!(claim(&mut worker, 10).len(), 1, "two run, and the new limit is three");
    admin.batch_execute("UPDATE jq_queues SET concurrency_limit = NULL WHERE queue_name = 'kept'").unwrap();

    // The first jobs with an ordering key: the worker's next claim takes the first of the key
    // and leaves the second, which waits for it.
    let enqueue = "SELECT jq_enqueue('kept', '{}', priority => 9, ordering_key => 'k')";
    let first: i64 = admin.query_one(enqueue, &[]).unwrap().get(0);
    let second: i64 = admin.query_one(enqueue, &[]).unwrap().get(0);
    let marked: bool =
        admin.query_one("SELECT ordering_keys FROM jq_queue_ids WHERE queue_name = 'kept'", &[]).unwrap().get(0);
    assert!(marked);
    let claimed = claim(&mut worker, 20);
    assert!(claimed.contains(&first) && !claimed.contains(&second), "{claimed:?}: {first}, then {second}");
    assert_eq!(claimed.len(), 8, "{claimed:?}: the seven jobs left without a key, and the first with one");

    // Enqueues keep the settings too: a job without its own max_attempts takes the queue's, as
    // changed elsewhere.
    let attempts = |client: &mut Client, sql: &str| -> i32 {
        let id: i64 = client.query_one(sql, &[]).unwrap().get(0);
        client.query_one("SELECT max_attempts FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get(0)
    };
    assert_eq!(attempts(&mut worker, "SELECT jq_enqueue('kept', '{}')"), 8);
    admin.batch_execute("SELECT jq_configure('kept', '{\"max_attempts\": 3}')").unwrap();
    assert_eq!(attempts(&mut worker, "SELECT jq_enqueue('kept', '{}')"), 3, "set by jq_configure");
    admin.batch_execute("UPDATE jq_queues SET max_attempts = 4 WHERE queue_name = 'kept'").unwrap();
    let batch = "SELECT min(b) FROM jq_enqueue_batch('kept', ARRAY['{}'::jsonb]) b";
    assert_eq!(attempts(&mut worker, batch), 4, "set by an UPDATE");

    // The keys' limits (guide, "Flow control"), the queue's and a key's own, set elsewhere apply
    // from the worker's next claim, even one in the transaction of its claim before.
    admin
        .batch_execute(
            "SELECT jq_configure('kept_keys', '{\"key_concurrency_limit\": 1}');
             SELECT jq_enqueue('kept_keys', '{}', concurrency_key => 'a') FROM generate_series(1, 9)",
        )
        .unwrap();
    let claim_keyed = |client: &mut Client| -> usize {
        client.query("SELECT id FROM jq_claim('kept_keys', 'w', batch_size => 10)", &[]).unwrap().len()
    };
    worker.batch_execute("BEGIN").unwrap();
    assert_eq!(claim_keyed(&mut worker), 1, "the queue's key limit");
    admin.batch_execute("SELECT jq_configure_key('kept_keys', 'a', '{\"concurrency_limit\": 3}')").unwrap();
    assert_eq!(claim_keyed(&mut worker), 2, "the key's own limit, set by jq_configure_key");
    admin
        .batch_execute(
            "DELETE FROM jq_key_settings WHERE queue_name = 'kept_keys';
             UPDATE jq_queues SET key_concurrency_limit = 5 WHERE queue_name = 'kept_keys'",
        )
        .unwrap();
    assert_eq!(claim_keyed(&mut worker), 2, "the queue's key limit again, raised by an UPDATE");
    worker.batch_execute("COMMIT").unwrap();
}

/// A queue's first enqueue gives it its number, which sessions keep with its settings. If that
/// transaction rolls back, the number goes with it, and the next first enqueue gets another: no
/// session may go on using the one rolled back, for enqueues or claims, in a transaction or in a
/// savepoint.
#[test]
fn a_queue_number_given_in_a_rolled_back_transaction_is_not_kept() {
    let cluster = Cluster::start();
    let mut first = cluster.connect();
    let mut other = cluster.connect();
    for (begin, end) in [("BEGIN", "ROLLBACK"), ("BEGIN; SAVEPOINT s", "ROLLBACK TO SAVEPOINT s; COMMIT")] {
        let queue = if begin == "BEGIN" { "undone" } else { "undone_in_savepoint" };
        first.batch_execute(begin).unwrap();
        first.execute("SELECT jq_enqueue($1, '{}')", &[&queue]).unwrap();
        assert_eq!(first.query("SELECT id FROM jq_claim($1, 'w')", &[&queue]).unwrap().len(), 1);
        first.batch_execute(end).unwrap();
        // Another session numbers the queue now; the first enqueues and claims under that number.
        let theirs: i64 = other.query_one("SELECT jq_enqueue($1, '{}')", &[&queue]).unwrap().get(0);
        let mine: i64 = first.query_one("SELECT jq_enqueue($1, '{}')", &[&queue]).unwrap().get(0);
        let claimed: Vec<i64> = first
            .query("SELECT id FROM jq_claim($1, 'w', batch_size => 10)", &[&queue])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert_eq!(claimed, [theirs, mine], "{queue}");
    }
}

/// A limit of 3 with 8 claimers: never more than 3 of the queue's jobs run at once.
#[test]
fn a_concurrency_limit_of_three_holds_under_eight_claimers() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute(RUN_LOG).unwrap();
    client
        .batch_execute(
            "INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('limited', 3);
             SELECT count(*) FROM jq_enqueue_batch('limited', array_fill('{}'::jsonb, ARRAY[300]))",
        )
        .unwrap();
    run_workers(&cluster, "limited", 8, Duration::from_millis(5));

    let (mut running, mut most) = (0, 0);
    let log = run_log(&mut client);
    assert_eq!(log.len(), 600, "every job runs once");
    for (_, _, event) in log {
        running += if event == "start" { 1 } else { -1 };
        most = most.max(running);
    }
    assert!(most <= 3, "{most} jobs of a queue limited to 3 ran at once");
    println!("most jobs running at once under a limit of 3: {most}");
}

/// Fault test 8 of DEVELOPMENT.md ("Commands and what the tests cover"): under a sustained flood of high-priority jobs (a producer keeps at least 100 of them pending, so
/// strict priority order would never reach a lower one), a low-priority job waits out its queue's
/// starvation limit and is then claimed ahead of younger high-priority jobs.
#[test]
fn a_low_priority_job_is_not_starved_by_a_flood() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('flood', '1 second');
             SELECT count(*) FROM jq_enqueue_batch('flood', array_fill('{}'::jsonb, ARRAY[200]), priority => 10)",
        )
        .unwrap();
    let low: i64 =
        client.query_one("SELECT jq_enqueue('flood', '{\"low\": true}', priority => 0)", &[]).unwrap().get(0);

    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let (mut producer, producer_stop) = (cluster.connect(), stop.clone());
    threads.push(thread::spawn(move || {
        while !producer_stop.load(Ordering::Relaxed) {
            producer
                .batch_execute(
                    "SELECT count(*) FROM jq_enqueue_batch('flood', array_fill('{}'::jsonb, ARRAY[50]), priority => 10)
                     WHERE (SELECT count(*) FROM jq_jobs WHERE queue_name = 'flood' AND status = 'pending') < 150",
                )
                .unwrap();
            thread::sleep(Duration::from_millis(5));
        }
    }));
    for w in 0..3 {
        let (mut c, stop) = (cluster.connect(), stop.clone());
        threads.push(thread::spawn(move || {
            let worker = format!("w{w}");
            while !stop.load(Ordering::Relaxed) {
                let rows = c
                    .query("SELECT id, lease_token FROM jq_claim('flood', $1, interval '1 minute')", &[&worker])
                    .unwrap();
                for r in rows {
                    c.query_one("SELECT jq_complete($1, $2, $3)", &[&r.get::<_, i64>(0), &worker, &r.get::<_, i64>(1)])
                        .unwrap();
                }
                thread::sleep(Duration::from_millis(2));
            }
        }));
    }
    wait_until("the low-priority job has been claimed", || {
        client.query_one("SELECT claimed_at IS NOT NULL FROM jq_jobs WHERE id = $1", &[&low]).unwrap().get(0)
    });
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }

    let row = client
        .query_one(
            "SELECT extract(epoch FROM l.claimed_at - l.available_at)::float8,
                    (SELECT count(*) FROM jq_jobs h
                     WHERE h.priority = 10 AND h.available_at < l.claimed_at
                       AND (h.claimed_at IS NULL OR h.claimed_at > l.claimed_at))
             FROM jq_jobs l WHERE l.id = $1",
            &[&low],
        )
        .unwrap();
    let (waited, overtaken): (f64, i64) = (row.get(0), row.get(1));
    assert!(overtaken > 0, "the low job ran only once no high-priority job was waiting: no fairness shown");
    assert!(waited >= 1.0, "claimed after {waited} s, before its starvation limit, while higher priorities waited");
    println!("low-priority job claimed after {waited:.2} s (starvation limit 1 s), ahead of {overtaken} waiting high-priority jobs");
}

/// Without preload each session keeps its own fairness bound (guide, "Fairness") and cannot hear
/// of other sessions' enqueues: a job another session enqueues already starving (a `run_at` long
/// past) is still claimed first, within the bound's second: ahead of hundreds of higher-priority
/// jobs, which strict priority order would all claim before it.
#[test]
fn without_preload_a_job_enqueued_already_starving_is_claimed_first_within_a_second() {
    let cluster = Cluster::start();
    let (mut worker, mut producer) = (cluster.connect(), cluster.connect());
    worker
        .batch_execute(
            "INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('late', '1 minute');
             SELECT count(*) FROM jq_enqueue_batch('late', array_fill('{}'::jsonb, ARRAY[500]), priority => 5)",
        )
        .unwrap();
    let next = |worker: &mut Client| -> i64 {
        let row = worker.query_one("SELECT id, lease_token FROM jq_claim('late', 'w')", &[]).unwrap();
        let (id, token): (i64, i64) = (row.get(0), row.get(1));
        worker.execute("SELECT jq_complete($1, 'w', $2)", &[&id, &token]).unwrap();
        id
    };
    for _ in 0..5 {
        next(&mut worker);
    }
    let starving: i64 = producer
        .query_one("SELECT jq_enqueue('late', '{}', priority => 1, run_at => now() - interval '10 minutes')", &[])
        .unwrap()
        .get(0);
    let started = std::time::Instant::now();
    let mut before = 0;
    wait_until("the starving job is claimed first", || {
        before += 1;
        next(&mut worker) == starving
    });
    let overtaken: i64 = producer
        .query_one("SELECT count(*) FROM jq_jobs WHERE queue_name = 'late' AND status = 'pending'", &[])
        .unwrap()
        .get(0);
    assert!(overtaken > 0, "the starving job came only after every higher-priority job: no fairness shown");
    println!(
        "claimed {:.3} s after its enqueue, after {} claims, ahead of {overtaken} higher-priority jobs",
        started.elapsed().as_secs_f64(),
        before - 1
    );
}

/// Claims and completes jobs of `queue`, `batch` at a time, until a claim that began after `until`
/// said the claims may stop finds none; returns how many it completed. (A claim that began before
/// may have missed a job made claimable as `until` was set.)
fn claim_and_complete(
    mut client: Client,
    queue: &'static str,
    worker: String,
    batch: i32,
    until: Arc<AtomicBool>,
) -> usize {
    let mut completed = 0;
    loop {
        let may_stop = until.load(Ordering::SeqCst);
        let rows = client
            .query("SELECT id, lease_token FROM jq_claim($1, $2, interval '1 minute', $3)", &[&queue, &worker, &batch])
            .unwrap_or_else(|e| panic!("{worker}: a claim failed: {e:?}"));
        if rows.is_empty() {
            if may_stop {
                return completed;
            }
            thread::sleep(Duration::from_millis(1));
            continue;
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        let tokens: Vec<i64> = rows.iter().map(|r| r.get(1)).collect();
        let done = client
            .query("SELECT * FROM jq_complete_batch($1, $2, $3)", &[&ids, &worker, &tokens])
            .unwrap_or_else(|e| panic!("{worker}: completing {ids:?} failed: {e:?}"));
        assert_eq!(done.len(), ids.len(), "{worker}: a completion of {ids:?} was refused");
        completed += ids.len();
    }
}

/// Large fan-ins under eight completing sessions (guide, "Workflows"): 20 jobs, each depending on
/// 100 others and so counting them in parts, which eight sessions claim and complete side by side,
/// half of them one job at a time and half in batches of up to 5, while a ninth claims the 20 as
/// they are released. Completions count down parts and then the job's row, batches several of
/// each, in the order of their keys: none may deadlock (its completion would fail) or lose a
/// count, and each of the 20 runs exactly once, claimed after every one of its dependencies
/// finished.
#[test]
fn large_fan_ins_under_eight_completers_never_deadlock_and_release_once() {
    let cluster = Cluster::start_with(&["deadlock_timeout = '50ms'"]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "DO $$
             DECLARE parents bigint[];
             BEGIN
                 FOR unit IN 1 .. 20 LOOP
                     parents := ARRAY(SELECT jq_enqueue_batch('fan', array_fill('{}'::jsonb, ARRAY[100])));
                     PERFORM jq_enqueue('merged', '{}', depends_on => parents);
                 END LOOP;
             END $$",
        )
        .unwrap();
    let (always, fans_done) = (Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(false)));
    let fans: Vec<_> = (0..8)
        .map(|w| {
            let (client, always) = (cluster.connect(), always.clone());
            thread::spawn(move || {
                claim_and_complete(client, "fan", format!("w{w}"), if w % 2 == 0 { 1 } else { 5 }, always)
            })
        })
        .collect();
    let merges = {
        let (client, fans_done) = (cluster.connect(), fans_done.clone());
        thread::spawn(move || claim_and_complete(client, "merged", "m".into(), 5, fans_done))
    };
    for fan in fans {
        fan.join().expect("a completing session failed");
    }
    fans_done.store(true, Ordering::SeqCst);
    merges.join().expect("the merging session failed");
    let row = client
        .query_one(
            "SELECT count(*) FILTER (WHERE queue_name = 'fan' AND status = 'succeeded'),
                    count(*) FILTER (WHERE queue_name = 'merged' AND status = 'succeeded' AND attempt_count = 1),
                    (SELECT count(*) FROM jq_dependency_parts)
             FROM jq_jobs",
            &[],
        )
        .unwrap();
    let (succeeded, merged, parts): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((succeeded, merged, parts), (2000, 20, 0), "dependencies succeeded, merges run once, parts left");
    let early: i64 = client
        .query_one(
            "SELECT count(*) FROM jq_jobs m
             WHERE m.queue_name = 'merged'
               AND m.claimed_at < (SELECT max(p.finished_at) FROM jq_jobs p WHERE p.id = ANY (m.depends_on))",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(early, 0, "a job was claimed before its last dependency finished");
}
