//! Durable claims (guide, "Durable claims"): a transaction that only claims or heartbeats commits
//! without waiting for its WAL flush, any other write keeps the commit as durable as configured,
//! and a crash that loses claims never lets a token be handed out twice.

use std::collections::HashSet;
use std::thread;

use jq_harness::{wait_until, Client, Cluster};

/// Whether `sql` commits without waiting for its flush. The server has a synchronous standby that
/// never comes, so a commit that waits for its flush waits in `SyncRep` until it is cancelled, and
/// one that does not returns: the kind of commit is seen without any timing.
fn commits_without_waiting(cluster: &Cluster, admin: &mut Client, sql: &'static str) -> bool {
    let mut client = cluster.connect();
    client.batch_execute("SET application_name = 'probe'").unwrap();
    let probe = thread::spawn(move || client.batch_execute(sql).map_err(|e| e.to_string()));
    let mut waited = false;
    wait_until("the statement returns or waits for its flush", || {
        if probe.is_finished() {
            return true;
        }
        let row = admin
            .query_opt(
                "SELECT pid FROM pg_stat_activity WHERE application_name = 'probe' AND wait_event = 'SyncRep'",
                &[],
            )
            .unwrap();
        if let Some(row) = row {
            admin.query_one("SELECT pg_cancel_backend($1)", &[&row.get::<_, i32>(0)]).unwrap();
            waited = true;
        }
        waited
    });
    // A cancelled wait leaves the transaction committed locally, as PostgreSQL does.
    probe.join().unwrap().unwrap();
    !waited
}

#[test]
fn only_a_transaction_that_only_claims_or_heartbeats_skips_its_flush() {
    // Without a background worker, a claim that is its own transaction may also take a
    // maintenance pass of the database (guide, "Maintenance"), whose writes keep its commit
    // durable: claims here take none, so that each probe is what it says.
    let cluster = Cluster::start_with(&["pg_jobqueue.inline_reap_max = 0"]);
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT jq_enqueue_batch('d', array_fill('{}'::jsonb, ARRAY[20]));
             CREATE TABLE side (n int);
             -- A queue rate, a key rate and a key limit (README, \"Flow control\").
             SELECT jq_configure('rate', '{\"rate_limit\": 100, \"rate_period\": \"1 hour\"}');
             SELECT jq_enqueue_batch('rate', array_fill('{}'::jsonb, ARRAY[5]));
             SELECT jq_configure('key-rate', '{\"key_rate_limit\": 100, \"key_rate_period\": \"1 hour\"}');
             SELECT jq_enqueue_batch('key-rate', array_fill('{}'::jsonb, ARRAY[5]), concurrency_key => 'a');
             SELECT jq_configure('key-limit', '{\"key_concurrency_limit\": 5}');
             SELECT jq_enqueue_batch('key-limit', array_fill('{}'::jsonb, ARRAY[5]), concurrency_key => 'a');
             -- This lifetime's token epoch, written before the standby that never comes is named.
             SELECT count(*) FROM jq_claim('warm-up', 'w');",
        )
        .unwrap();
    // Each on its own: a statement list runs as one transaction, which ALTER SYSTEM refuses.
    admin.batch_execute("ALTER SYSTEM SET synchronous_standby_names = 'nobody'").unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_until("the setting is in force", || {
        let value: String = cluster.connect().query_one("SHOW synchronous_standby_names", &[]).unwrap().get(0);
        value == "nobody"
    });
    let mut probe = |sql| commits_without_waiting(&cluster, &mut admin, sql);

    assert!(probe("SELECT count(*) FROM jq_claim('d', 'w')"), "a claim alone waited for its flush");
    assert!(
        probe("BEGIN; SELECT count(*) FROM jq_claim('d', 'w', batch_size => 2); SELECT count(*) FROM jq_claim('d', 'w'); COMMIT"),
        "claims alone waited for their flush"
    );
    assert!(
        probe("SELECT jq_heartbeat(id, 'w', lease_token) FROM jq_jobs WHERE lease_owner = 'w'"),
        "heartbeats alone waited for their flush"
    );
    assert!(
        !probe("BEGIN; SELECT count(*) FROM jq_claim('d', 'w'); INSERT INTO side VALUES (1); COMMIT"),
        "a claim with another write after it did not wait"
    );
    assert!(
        !probe("BEGIN; INSERT INTO side VALUES (2); SELECT count(*) FROM jq_claim('d', 'w'); COMMIT"),
        "a claim with another write before it did not wait"
    );
    assert!(
        !probe("SET pg_jobqueue.async_claims = off; SELECT count(*) FROM jq_claim('d', 'w')"),
        "a claim waited not, with async_claims off"
    );
    // A claim a rate counts commits its count, and so itself, durably: a crash must not lose a
    // counted claim whose job a worker may have run. A key limit counts nothing of its own.
    assert!(!probe("SELECT count(*) FROM jq_claim('rate', 'w')"), "a claim counted by a queue rate did not wait");
    assert!(!probe("SELECT count(*) FROM jq_claim('key-rate', 'w')"), "a claim counted by a key rate did not wait");
    assert!(probe("SELECT count(*) FROM jq_claim('key-limit', 'w')"), "a claim under a key limit waited");
    assert!(!probe("SELECT jq_enqueue('d', '{}')"), "an enqueue did not wait for its flush");
    assert!(
        !probe("SELECT jq_complete(id, 'w', lease_token) FROM jq_jobs WHERE lease_owner = 'w' LIMIT 1"),
        "a completion did not wait for its flush"
    );
}

/// A lease as a client was handed it.
type Lease = (i64, i64, String);

/// Bursts of claims, each ended at once by `pg_ctl stop -m immediate`, lose the claims whose WAL
/// was not flushed; the jobs are then claimed again. No (job, token) pair may be handed out twice,
/// and a completion with a token the crash lost must be refused. `JQ_CRASH_ROUNDS` sets how many
/// bursts (`make soak` runs 20).
#[test]
fn claims_lost_in_a_crash_never_hand_out_a_token_twice() {
    let rounds: usize = std::env::var("JQ_CRASH_ROUNDS").ok().and_then(|n| n.parse().ok()).unwrap_or(3);
    // The WAL writer waits long between flushes, so that a burst ends with WAL still unflushed.
    let cluster = Cluster::start_with(&["wal_writer_delay = '10s'", "wal_writer_flush_after = '16MB'"]);
    let mut handed: HashSet<(i64, i64)> = HashSet::new();
    let mut lost_in_all = 0;
    for round in 0..rounds {
        let queue = format!("crash{round}");
        let mut admin = cluster.connect();
        admin.execute("SELECT jq_enqueue_batch($1, array_fill('{}'::jsonb, ARRAY[400]))", &[&queue]).unwrap();
        let burst: Vec<Lease> = (0..4)
            .map(|w| {
                let (mut client, queue) = (cluster.connect(), queue.clone());
                thread::spawn(move || {
                    let worker = format!("w{w}");
                    let mut leases = Vec::new();
                    for _ in 0..30 {
                        let sql = "SELECT id, lease_token FROM jq_claim($1, $2, interval '10 minutes', 3)";
                        for row in client.query(sql, &[&queue, &worker]).unwrap() {
                            leases.push((row.get(0), row.get(1), worker.clone()));
                        }
                    }
                    leases
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        cluster.crash_and_restart();

        let mut client = cluster.connect();
        let mut lost = Vec::new();
        for (id, token, worker) in &burst {
            assert!(handed.insert((*id, *token)), "job {id} was handed token {token} twice");
            let row_token: i64 =
                client.query_one("SELECT lease_token FROM jq_jobs WHERE id = $1", &[id]).unwrap().get(0);
            if row_token != *token {
                assert!(row_token < *token, "job {id} has token {row_token}, above the {token} handed out");
                lost.push((*id, *token, worker.clone()));
            }
        }
        // Claim everything the crash returned to pending, and more.
        loop {
            let rows = client
                .query("SELECT id, lease_token FROM jq_claim($1, 'after', interval '10 minutes', 100)", &[&queue])
                .unwrap();
            if rows.is_empty() {
                break;
            }
            for row in rows {
                let (id, token): (i64, i64) = (row.get(0), row.get(1));
                assert!(handed.insert((id, token)), "job {id} was handed token {token} twice, after the crash");
            }
        }
        for (id, token, worker) in &lost {
            let completed: bool =
                client.query_one("SELECT jq_complete($1, $2, $3)", &[id, worker, token]).unwrap().get(0);
            assert!(!completed, "job {id}: a completion with the lost token {token} was accepted");
        }
        eprintln!("round {round}: {} claims handed out, {} lost in the crash", burst.len(), lost.len());
        lost_in_all += lost.len();
    }
    eprintln!("{lost_in_all} claims lost in {rounds} crashes, none of their tokens handed out again");
}
