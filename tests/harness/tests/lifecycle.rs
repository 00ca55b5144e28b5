//! The lease lifecycle across real sessions.

use std::collections::{HashMap, HashSet};
use std::thread;

use jq_harness::client::{claim, row_text};
use jq_harness::{wait_until, Client, Cluster};

const JOBS: i64 = 2000;
const CLAIMERS: usize = 8;

fn guarded(client: &mut Client, verb: &str, id: i64, worker: &str, token: i64) -> bool {
    let sql = match verb {
        "complete" => "SELECT jq_complete($1, $2, $3)",
        "heartbeat" => "SELECT jq_heartbeat($1, $2, $3)",
        "fail" => "SELECT jq_fail($1, $2, $3, 'LATE')",
        _ => unreachable!(),
    };
    client.query_one(sql, &[&id, &worker, &token]).unwrap().get(0)
}

/// Eight workers, half claiming one job at a time and half in batches of 5, drain 2,000 jobs: no
/// (job, lease_token) is granted twice and every job is completed exactly once.
#[test]
fn eight_claimers_drain_the_queue_and_each_grant_is_unique() {
    let cluster = Cluster::start();
    cluster
        .connect()
        .execute(
            // In batches of pg_jobqueue.max_batch_size (1000) at most.
            "SELECT count(*) FROM generate_series(0, $1::int - 1, 1000) c,
                    LATERAL jq_enqueue_batch('drain', (SELECT array_agg(jsonb_build_object('n', i))
                                                       FROM generate_series(c + 1, least(c + 1000, $1::int)) i))",
            &[&(JOBS as i32)],
        )
        .unwrap();

    let workers: Vec<_> = (0..CLAIMERS)
        .map(|w| {
            let mut client = cluster.connect();
            thread::spawn(move || {
                let worker = format!("worker-{w}");
                let batch: i32 = if w % 2 == 0 { 1 } else { 5 };
                let (mut grants, mut completions) = (Vec::new(), Vec::new());
                loop {
                    let rows = client
                        .query(
                            "SELECT id, lease_token FROM jq_claim('drain', $1, interval '30 s', $2)",
                            &[&worker, &batch],
                        )
                        .unwrap();
                    if rows.is_empty() {
                        return (grants, completions);
                    }
                    for row in rows {
                        let (id, token): (i64, i64) = (row.get(0), row.get(1));
                        grants.push((id, token));
                        if guarded(&mut client, "complete", id, &worker, token) {
                            completions.push(id);
                        }
                    }
                }
            })
        })
        .collect();

    let mut grants = Vec::new();
    let mut completions: HashMap<i64, usize> = HashMap::new();
    for handle in workers {
        let (g, c) = handle.join().expect("worker thread");
        grants.extend(g);
        for id in c {
            *completions.entry(id).or_default() += 1;
        }
    }

    let unique: HashSet<_> = grants.iter().collect();
    assert_eq!(unique.len(), grants.len(), "a (job, lease_token) was granted twice");
    assert_eq!(grants.len() as i64, JOBS, "with no failures every job is granted exactly once");
    assert_eq!(completions.len() as i64, JOBS);
    assert!(completions.values().all(|&n| n == 1), "a job was completed twice");

    let row = cluster
        .connect()
        .query_one(
            "SELECT count(*) FILTER (WHERE status = 'succeeded'), sum(attempt_count), max(lease_token)
             FROM jq_jobs WHERE queue_name = 'drain'",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), JOBS);
    assert_eq!(row.get::<_, i64>(1), JOBS);
    assert_eq!(row.get::<_, i64>(2), 1);
}

/// Fault test 3 of DEVELOPMENT.md ("Commands and what the tests cover"): worker A's lease expires, the reaper returns the job, worker B claims it.
/// Everything A then tries with its stale token is refused and changes nothing; B's completion counts.
#[test]
fn a_stale_token_changes_nothing_after_reap_and_reclaim() {
    let cluster = Cluster::start();
    let (mut a, mut b, mut reaper) = (cluster.connect(), cluster.connect(), cluster.connect());
    let id: i64 = a.query_one("SELECT jq_enqueue('stale', '{}')", &[]).unwrap().get(0);
    let (_, old) = claim(&mut a, "stale", "worker-a", "1 second").unwrap();

    wait_until("the lease has expired and is reaped", || {
        reaper.query_one("SELECT jq_reap()", &[]).unwrap().get::<_, i32>(0) == 1
    });
    let mut reclaimed = None;
    wait_until("the backoff has passed and B claims the job", || {
        reclaimed = claim(&mut b, "stale", "worker-b", "1 minute");
        reclaimed.is_some()
    });
    let (again, new) = reclaimed.unwrap();
    assert_eq!(again, id);
    assert!(new > old);

    let before = row_text(&mut b, id);
    for verb in ["complete", "heartbeat", "fail"] {
        assert!(!guarded(&mut a, verb, id, "worker-a", old), "a stale {verb} was accepted");
    }
    assert!(!guarded(&mut a, "complete", id, "worker-a", new), "the right token from the wrong owner");
    assert_eq!(row_text(&mut b, id), before, "a refused call changed the job");

    assert!(guarded(&mut b, "complete", id, "worker-b", new));
    let row = b.query_one("SELECT status::text, attempt_count FROM jq_jobs WHERE id = $1", &[&id]).unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, i32>(1)), ("succeeded".to_string(), 2));
}

/// Fault test 7 of DEVELOPMENT.md ("Commands and what the tests cover"): a claim never waits on a row another transaction holds: with lock_timeout
/// set, waiting would raise an error, so getting rows (or none) back shows the claim skipped the
/// locked job, and the rest of the queue stays claimable.
#[test]
fn a_claim_skips_a_job_locked_by_another_transaction() {
    let cluster = Cluster::start();
    let (mut holder, mut claimer) = (cluster.connect(), cluster.connect());
    let first: i64 = holder.query_one("SELECT jq_enqueue('locked', '{}', priority => 9)", &[]).unwrap().get(0);
    let second: i64 = holder.query_one("SELECT jq_enqueue('locked', '{}')", &[]).unwrap().get(0);

    let mut tx = holder.transaction().unwrap();
    tx.execute("SELECT 1 FROM jq_live_jobs WHERE id = $1 FOR UPDATE", &[&first]).unwrap();
    claimer.batch_execute("SET lock_timeout = '5s'").unwrap();
    assert_eq!(claim(&mut claimer, "locked", "w", "1 minute").map(|c| c.0), Some(second));
    assert_eq!(claim(&mut claimer, "locked", "w", "1 minute"), None);
    tx.rollback().unwrap();
    assert_eq!(claim(&mut claimer, "locked", "w", "1 minute").map(|c| c.0), Some(first));
}

/// A completion that commits first wins: while the worker's completing transaction holds the row,
/// the reaper skips it (without waiting) even though the lease has since expired, and the job ends
/// succeeded.
#[test]
fn a_completion_in_flight_wins_over_the_reaper() {
    let cluster = Cluster::start();
    let (mut worker, mut reaper) = (cluster.connect(), cluster.connect());
    let id: i64 = worker.query_one("SELECT jq_enqueue('race', '{}')", &[]).unwrap().get(0);
    let (_, token) = claim(&mut worker, "race", "w", "1 second").unwrap();

    let mut tx = worker.transaction().unwrap();
    let done: bool = tx.query_one("SELECT jq_complete($1, 'w', $2)", &[&id, &token]).unwrap().get(0);
    assert!(done);
    wait_until("the lease would have expired", || {
        reaper
            .query_one("SELECT lease_expires_at < clock_timestamp() FROM jq_jobs WHERE id = $1", &[&id])
            .unwrap()
            .get(0)
    });
    reaper.batch_execute("SET lock_timeout = '5s'").unwrap();
    assert_eq!(reaper.query_one("SELECT jq_reap()", &[]).unwrap().get::<_, i32>(0), 0);
    tx.commit().unwrap();
    assert_eq!(reaper.query_one("SELECT jq_reap()", &[]).unwrap().get::<_, i32>(0), 0);
    let status: String = reaper.query_one("SELECT status::text FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get(0);
    assert_eq!(status, "succeeded");
}
