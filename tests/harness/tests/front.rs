//! The claim front (guide, "Old snapshots"): a claim starts its walk of the claim index at its
//! queue's front instead of the queue's first entry, so the entries an old snapshot keeps cost
//! nothing; and whatever makes a job pending below the front lowers it first, so the next claim
//! still takes the first job in claim order. With the library preloaded the fronts live in the
//! server's shared memory; without, in a segment the first claim makes: the tests of claim order
//! run on both.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use jq_harness::client::{claim, complete, enqueue_many, entries_read_behind_an_old_snapshot};
use jq_harness::{wait_until, Client, Cluster};

const PRELOAD: &str = "shared_preload_libraries = 'pg_jobqueue'";

/// Where the fronts live: the server's shared memory (preloaded), or the segment (not).
const SERVERS: [(&str, &[&str]); 2] = [("preloaded", &[PRELOAD]), ("not preloaded", &[])];

/// Fewer than a quarter of the 2,000 entries each of 50 claims would read from the queue's start.
const SKIPPING: i64 = 50 * 2000 / 4;

#[test]
fn claims_skip_the_entries_an_old_snapshot_keeps() {
    // Without the front each claim visits the 2,000 claimed entries first. This is also what the
    // library did before the front, and it shows the count sees them.
    let cluster = Cluster::start_with(&["pg_jobqueue.claim_front = off"]);
    let without_front = entries_read_behind_an_old_snapshot(&cluster);
    assert!(without_front >= 50 * 2000, "{without_front}");
    drop(cluster);

    // With the front, a claim reads the entries from it on: its own and those of claims running
    // beside it, plus a look from the start at most once a second. Even ten such looks read less
    // than a quarter of what the walk from the start would.
    for (server, settings) in SERVERS {
        let cluster = Cluster::start_with(settings);
        let with_front = entries_read_behind_an_old_snapshot(&cluster);
        assert!(with_front < SKIPPING, "{server}: {with_front}");
        println!(
            "claim index entries read by 50 claims: {without_front} without the front, {with_front} with it, {server}"
        );
    }
}

/// Without preload, a restart (or a crash) destroys the fronts' segment and leaves the file that
/// names it: the first claim after makes a new one, and claims skip again. So does a file that names
/// nothing of ours.
#[test]
fn without_preload_a_restart_makes_a_new_segment() {
    let cluster = Cluster::start();
    assert!(entries_read_behind_an_old_snapshot(&cluster) < SKIPPING);
    let file = cluster.data_dir().join("pg_stat_tmp/pg_jobqueue.segment");
    let first = std::fs::read_to_string(&file).expect("the file naming the segment");
    cluster.crash_and_restart();
    let read = entries_read_behind_an_old_snapshot(&cluster);
    assert!(read < SKIPPING, "after a crash: {read}");
    let second = std::fs::read_to_string(&file).unwrap();
    assert_ne!(first, second);
    cluster.halt();
    std::fs::write(&file, "12345 678\n").unwrap();
    cluster.start_again();
    let read = entries_read_behind_an_old_snapshot(&cluster);
    assert!(read < SKIPPING, "after a file naming no segment: {read}");
    assert_ne!(std::fs::read_to_string(&file).unwrap(), "12345 678\n");
}

#[test]
fn a_claim_in_an_older_snapshot_does_not_move_the_front() {
    on_both(|settings| {
        let (cluster, mut client) = queue_with_a_moved_front(settings);
        let mut old = cluster.connect();
        old.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1").unwrap();
        // Committed after that snapshot was taken, before the front is read: the front is lowered to
        // it, but the claim below cannot see it, claims a job after it, and must not move past it.
        let early = one(&mut client, "SELECT jq_enqueue('q', '{}', run_at => now() - interval '1 minute')");
        let passed = next_claimed(&mut old);
        assert_ne!(passed, early);
        old.batch_execute("COMMIT").unwrap();
        assert_eq!(next_claimed(&mut client), early);
    });
}

/// Runs `test` on a preloaded server, then on one that is not.
fn on_both(test: impl Fn(&[&str])) {
    for (server, settings) in SERVERS {
        println!("{server}");
        test(settings);
    }
}

/// A server with a queue whose front has moved past 100 claimed jobs, and 100 left.
fn queue_with_a_moved_front(settings: &[&str]) -> (Cluster, Client) {
    let cluster = Cluster::start_with(settings);
    let mut client = cluster.connect();
    client.batch_execute("SET pg_jobqueue.inline_reap_max = 0").unwrap();
    enqueue_many(&mut client, "q", 200);
    for _ in 0..100 {
        let (id, token) = claim(&mut client, "q", "w", "1 hour").unwrap();
        assert!(complete(&mut client, id, "w", token));
    }
    (cluster, client)
}

fn next_claimed(client: &mut Client) -> i64 {
    claim(client, "q", "w", "1 hour").expect("a pending job").0
}

fn one(client: &mut Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).unwrap().get(0)
}

#[test]
fn a_job_enqueued_before_the_front_is_claimed_next() {
    on_both(|settings| {
        let (_cluster, mut client) = queue_with_a_moved_front(settings);
        // A minute ago: before the front, but not so long ago that fairness would claim it first anyway.
        let early = one(&mut client, "SELECT jq_enqueue('q', '{}', run_at => now() - interval '1 minute')");
        assert_eq!(next_claimed(&mut client), early);
        let urgent = one(&mut client, "SELECT jq_enqueue('q', '{}', priority => 5)");
        assert_eq!(next_claimed(&mut client), urgent);
        let batch = one(
        &mut client,
        "SELECT min(b) FROM jq_enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[3]), run_at => now() - interval '1 minute') b",
    );
        assert_eq!(next_claimed(&mut client), batch);
    });
}

/// The front is lowered when the enqueue commits; a claim in the enqueuing transaction itself sees
/// the job before that, and takes it, even from a queue whose front has passed every job.
#[test]
fn a_claim_in_the_enqueuing_transaction_takes_its_job() {
    on_both(|settings| {
        let (_cluster, mut client) = queue_with_a_moved_front(settings);
        while claim(&mut client, "q", "w", "1 hour").is_some() {}
        client.batch_execute("BEGIN").unwrap();
        let early = one(&mut client, "SELECT jq_enqueue('q', '{}', run_at => now() - interval '1 minute')");
        assert_eq!(claim(&mut client, "q", "w", "1 hour").map(|c| c.0), Some(early));
        client.batch_execute("COMMIT").unwrap();
    });
}

#[test]
fn jobs_of_a_claim_that_rolls_back_are_claimed_next_though_claims_passed_them() {
    on_both(|settings| {
        let (cluster, mut client) = queue_with_a_moved_front(settings);
        let mut other = cluster.connect();
        for sql in [("BEGIN", "ROLLBACK"), ("BEGIN; SAVEPOINT s", "ROLLBACK TO SAVEPOINT s; COMMIT")] {
            client.batch_execute(sql.0).unwrap();
            let rolled_back = next_claimed(&mut client);
            // Another session claims past the locked job and moves the front beyond it.
            let (id, token) = claim(&mut other, "q", "w", "1 hour").unwrap();
            assert!(id > rolled_back);
            assert!(complete(&mut other, id, "w", token));
            client.batch_execute(sql.1).unwrap();
            assert_eq!(next_claimed(&mut other), rolled_back, "after {}", sql.1);
            other.batch_execute("SELECT jq_cancel(id) FROM jq_jobs WHERE status = 'running'").unwrap();
        }
    });
}

#[test]
fn a_cancel_that_rolls_back_leaves_its_job_first() {
    on_both(|settings| {
        let (cluster, mut client) = queue_with_a_moved_front(settings);
        let mut other = cluster.connect();
        let first = one(&mut client, "SELECT min(id) FROM jq_jobs WHERE status = 'pending'");
        client.batch_execute(&format!("BEGIN; SELECT jq_cancel({first})")).unwrap();
        let (id, token) = claim(&mut other, "q", "w", "1 hour").unwrap();
        assert!(id > first);
        assert!(complete(&mut other, id, "w", token));
        client.batch_execute("ROLLBACK").unwrap();
        assert_eq!(next_claimed(&mut other), first);
    });
}

#[test]
fn failed_reaped_and_redriven_jobs_come_back_in_claim_order() {
    on_both(|settings| {
        let (_cluster, mut client) = queue_with_a_moved_front(settings);
        // Retried after a failure: priority 5 puts it before every job left.
        let urgent = one(&mut client, "SELECT jq_enqueue('q', '{}', priority => 5)");
        let (id, token) = claim(&mut client, "q", "w", "1 hour").unwrap();
        assert_eq!(id, urgent);
        client.query_one("SELECT jq_fail($1, 'w', $2, 'E', retry_in => '0 s')", &[&id, &token]).unwrap();
        assert_eq!(next_claimed(&mut client), urgent, "retried after failure");

        // Expired and reaped, with a backoff of a millisecond.
        client
            .batch_execute("SELECT jq_configure('q', '{\"backoff_base\": \"1 ms\", \"backoff_cap\": \"1 ms\"}')")
            .unwrap();
        client.batch_execute(&format!("SELECT jq_cancel(id) FROM jq_jobs WHERE id = {urgent}")).unwrap();
        client.batch_execute(&format!("SELECT jq_retry({urgent})")).unwrap();
        assert_eq!(next_claimed(&mut client), urgent, "re-driven");
        client.batch_execute(&format!("UPDATE jq_live_jobs SET lease_expires_at = now() WHERE id = {urgent}")).unwrap();
        assert_eq!(one(&mut client, "SELECT jq_reap()::bigint"), 1);
        wait_until("the backoff passes", || {
            one(&mut client, "SELECT count(*) FROM jq_jobs WHERE available_at > now()") == 0
        });
        assert_eq!(next_claimed(&mut client), urgent, "reaped");

        // Dead, then re-driven in bulk.
        let token = one(&mut client, &format!("SELECT lease_token FROM jq_jobs WHERE id = {urgent}"));
        client.query_one("SELECT jq_fail($1, 'w', $2, 'E', retryable => false)", &[&urgent, &token]).unwrap();
        assert_eq!(one(&mut client, "SELECT jq_retry_dead('q')::bigint"), 1);
        assert_eq!(next_claimed(&mut client), urgent, "re-driven in bulk");
    });
}

#[test]
fn a_keyed_job_waiting_for_its_predecessor_is_not_passed_for_good() {
    on_both(|settings| {
        let cluster = Cluster::start_with(settings);
        let mut client = cluster.connect();
        enqueue_many(&mut client, "q", 10);
        // The queue's first claim looks from the start and finds no keyed job.
        let (id, token) = claim(&mut client, "q", "w", "1 hour").unwrap();
        assert!(complete(&mut client, id, "w", token));
        // Keyed jobs come next, first in claim order.
        let first = one(
            &mut client,
            "SELECT jq_enqueue('q', '{}', run_at => now() - interval '1 minute', ordering_key => 'k')",
        );
        let second = one(
            &mut client,
            "SELECT jq_enqueue('q', '{}', run_at => now() - interval '1 minute', ordering_key => 'k')",
        );
        let (id, token) = claim(&mut client, "q", "w", "1 hour").unwrap();
        assert_eq!(id, first);
        // `second` waits for `first`; claims take the jobs behind it meanwhile.
        for _ in 0..5 {
            let (id, token) = claim(&mut client, "q", "w", "1 hour").unwrap();
            assert!(id < first);
            assert!(complete(&mut client, id, "w", token));
        }
        assert!(complete(&mut client, first, "w", token));
        assert_eq!(next_claimed(&mut client), second);
    });
}

#[test]
fn a_job_made_pending_outside_the_functions_is_found_within_a_second() {
    on_both(|settings| {
        let (_cluster, mut client) = queue_with_a_moved_front(settings);
        let first = one(&mut client, "SELECT min(id) FROM jq_jobs WHERE status = 'succeeded'");
        client
        .batch_execute(&format!(
            "WITH h AS (DELETE FROM jq_job_history WHERE id = {first} RETURNING *)
             INSERT INTO jq_live_jobs (id, queue_id, payload, priority, available_at, max_attempts, lease_token, created_at)
             SELECT id, queue_id, payload, priority, available_at, max_attempts, lease_token, created_at FROM h"
        ))
        .unwrap();
        // The first claim may pass it; one within a second takes it, before the 100 jobs behind it run out.
        wait_until("an operator's UPDATE is seen by claims", || {
            thread::sleep(std::time::Duration::from_millis(50));
            let id = next_claimed(&mut client);
            client.batch_execute(&format!("SELECT jq_cancel({id})")).unwrap();
            id == first
        });
    });
}

/// Claimers that complete, fail, and roll back, beside producers that enqueue ahead of the front
/// (higher priorities, past run_at): once they stop, one claim takes every due pending job. A job
/// left below the front would be missing from it.
#[test]
fn under_concurrent_changes_no_pending_job_is_left_below_the_front() {
    on_both(|settings| {
        let cluster = Arc::new(Cluster::start_with(settings));
        let mut setup = cluster.connect();
        enqueue_many(&mut setup, "q", 2000);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for worker in 0..3 {
            let (cluster, stop) = (cluster.clone(), stop.clone());
            threads.push(thread::spawn(move || {
                let mut client = cluster.connect();
                client.batch_execute("SET pg_jobqueue.inline_reap_max = 0").unwrap();
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let batch = 1 + (n % 4) as i32;
                    let rolls_back = n % 7 == worker;
                    if rolls_back {
                        client.batch_execute("BEGIN").unwrap();
                    }
                    let jobs: Vec<(i64, i64)> = client
                        .query("SELECT id, lease_token FROM jq_claim('q', 'w', batch_size => $1)", &[&batch])
                        .unwrap()
                        .iter()
                        .map(|r| (r.get(0), r.get(1)))
                        .collect();
                    if rolls_back {
                        client.batch_execute("ROLLBACK").unwrap();
                        continue;
                    }
                    for (i, (id, token)) in jobs.into_iter().enumerate() {
                        if (n + i as u64).is_multiple_of(5) {
                            client
                                .query_one("SELECT jq_fail($1, 'w', $2, 'E', retry_in => '0 s')", &[&id, &token])
                                .unwrap();
                        } else {
                            assert!(complete(&mut client, id, "w", token));
                        }
                    }
                }
            }));
        }
        for producer in 0..2 {
            let (cluster, stop) = (cluster.clone(), stop.clone());
            threads.push(thread::spawn(move || {
                let mut client = cluster.connect();
                let mut n = 0i32;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    client
                        .execute(
                            "SELECT jq_enqueue('q', '{}', priority => $1, run_at => now() - make_interval(secs => $2))",
                            &[&((n + producer) % 3), &f64::from(n % 50)],
                        )
                        .unwrap();
                }
            }));
        }
        thread::sleep(std::time::Duration::from_secs(5));
        stop.store(true, Ordering::Relaxed);
        for thread in threads {
            thread.join().unwrap();
        }
        let due = one(&mut setup, "SELECT count(*) FROM jq_jobs WHERE status = 'pending' AND available_at <= now()");
        let mut claimed = 0;
        loop {
            let batch = one(&mut setup, "SELECT count(*) FROM jq_claim('q', 'w', batch_size => 1000)");
            claimed += batch;
            if batch < 1000 {
                break;
            }
        }
        assert_eq!(claimed, due);
    });
}

/// The fairness check starts at the front as the claim does, and still looks at every priority
/// below it: a job starving two priorities under the front is the next one claimed.
#[test]
fn a_job_starving_below_the_front_is_claimed_first() {
    on_both(|settings| {
        let cluster = Cluster::start_with(settings);
        let mut client = cluster.connect();
        client.batch_execute("INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('q', '1 minute')").unwrap();
        client
            .batch_execute(
                "SELECT jq_enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[100]), priority => 9);
             SELECT jq_enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[10]), priority => 5);",
            )
            .unwrap();
        for _ in 0..20 {
            let (id, token) = claim(&mut client, "q", "w", "1 minute").unwrap();
            assert!(complete(&mut client, id, "w", token));
        }
        let starving: i64 = client
            .query_one("SELECT jq_enqueue('q', '{}', priority => 1, run_at => now() - interval '10 minutes')", &[])
            .unwrap()
            .get(0);
        assert_eq!(claim(&mut client, "q", "w", "1 minute").map(|c| c.0), Some(starving));
    });
}

/// A claim leaves the fairness check out while the queue's fairness bound says no job can starve;
/// the bound holds at most a second, so a job that starts starving without any function knowing
/// (here an operator's UPDATE) is claimed first within about that.
#[test]
fn a_job_made_to_starve_outside_the_functions_is_claimed_first_within_a_second() {
    on_both(|settings| {
        let cluster = Cluster::start_with(settings);
        let mut client = cluster.connect();
        client.batch_execute("INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('q', '1 minute')").unwrap();
        enqueue_many(&mut client, "q", 500);
        for _ in 0..5 {
            let (id, token) = claim(&mut client, "q", "w", "1 minute").unwrap();
            assert!(complete(&mut client, id, "w", token));
        }
        let last: i64 = client.query_one("SELECT max(id) FROM jq_live_jobs", &[]).unwrap().get(0);
        client
            .batch_execute(&format!(
                "UPDATE jq_live_jobs SET available_at = now() - interval '10 minutes' WHERE id = {last}"
            ))
            .unwrap();
        let started = std::time::Instant::now();
        wait_until("the starving job is claimed first", || {
            let (id, token) = claim(&mut client, "q", "w", "1 minute").unwrap();
            assert!(complete(&mut client, id, "w", token));
            id == last
        });
        println!("claimed first {:.3} s after it started to starve", started.elapsed().as_secs_f64());
    });
}

/// `jq_metrics()` reports the queues that found no claim front (guide, "Operating"), preloaded
/// or not: without preload the fronts are in a segment of their own, and the line was missing.
#[test]
fn the_metrics_report_refused_claim_fronts_with_or_without_preload() {
    on_both(|settings| {
        let cluster = Cluster::start_with(settings);
        let mut client = cluster.connect();
        client.batch_execute("SELECT jq_enqueue('q', '{}'); SELECT count(*) FROM jq_claim('q', 'w')").unwrap();
        let metrics: String = client.query_one("SELECT jq_metrics()", &[]).unwrap().get(0);
        assert!(metrics.contains("\njq_shared_slots_refused_total{table=\"claim_fronts\"} 0\n"), "{metrics}");
    });
}
