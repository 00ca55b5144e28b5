//! The queue verbs and reads that many tests use, in their plainest form, for one client.

use std::thread;
use std::time::Duration;

use postgres::{Client, NoTls};

use crate::{wait_until, Cluster};

/// A connection to `database` as `user`.
pub fn connect_as(cluster: &Cluster, database: &str, user: &str) -> Client {
    let dsn = cluster
        .dsn()
        .replace("dbname=postgres", &format!("dbname={database}"))
        .replace("user=postgres", &format!("user={user}"));
    Client::connect(&dsn, NoTls).unwrap_or_else(|e| panic!("connect to {database} as {user}: {e}"))
}

/// Enqueues `n` empty jobs, in batches of pg_jobqueue.max_batch_size (1000) at most.
pub fn enqueue_many(client: &mut Client, queue: &str, n: i32) {
    client
        .execute(
            "SELECT count(*) FROM generate_series(0, $2::int - 1, 1000) c,
                    LATERAL jq_enqueue_batch($1, array_fill('{}'::jsonb, ARRAY[least(1000, $2::int - c)]))",
            &[&queue, &n],
        )
        .unwrap();
}

/// Claims one job; returns (id, lease_token).
pub fn claim(client: &mut Client, queue: &str, worker: &str, lease: &str) -> Option<(i64, i64)> {
    client
        .query_opt("SELECT id, lease_token FROM jq_claim($1, $2, $3::text::interval)", &[&queue, &worker, &lease])
        .unwrap()
        .map(|row| (row.get(0), row.get(1)))
}

pub fn complete(client: &mut Client, id: i64, worker: &str, token: i64) -> bool {
    client.query_one("SELECT jq_complete($1, $2, $3)", &[&id, &worker, &token]).unwrap().get(0)
}

/// A job's status, as text.
pub fn status(client: &mut Client, id: i64) -> String {
    client.query_one("SELECT status::text FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get(0)
}

/// A job's whole row, as text: for asserting that a refused call changed nothing.
pub fn row_text(client: &mut Client, id: i64) -> String {
    client.query_one("SELECT j::text FROM jq_jobs j WHERE id = $1", &[&id]).unwrap().get(0)
}

/// The SQLSTATE of a failed statement, or None if it succeeded.
pub fn sqlstate(client: &mut Client, sql: &str) -> Option<String> {
    client
        .batch_execute(sql)
        .err()
        .map(|e| e.code().map(|c| c.code().to_owned()).unwrap_or_else(|| format!("no SQLSTATE: {e}")))
}

/// Claims and completes every job of `queue`, reaping as it goes, until `live` (the count of the
/// queue's pending and running jobs, where the caller keeps it) is zero; returns the jobs it
/// completed.
pub fn drain(client: &mut Client, queue: &str, mut live: impl FnMut(&mut Client) -> i64) -> Vec<i64> {
    let mut completed = Vec::new();
    wait_until("the queue has drained", || {
        client.query_one("SELECT jq_reap()", &[]).unwrap();
        let rows = client
            .query("SELECT id, lease_token FROM jq_claim($1, 'drainer', interval '1 minute', 100)", &[&queue])
            .unwrap();
        for row in &rows {
            let (id, token): (i64, i64) = (row.get(0), row.get(1));
            if complete(client, id, "drainer", token) {
                completed.push(id);
            }
        }
        let live = live(client);
        if live > 0 && rows.is_empty() {
            thread::sleep(Duration::from_millis(50));
        }
        live == 0
    });
    completed
}

/// The pending and running jobs of `queue`, on the server of `client`.
pub fn live_jobs(client: &mut Client, queue: &str) -> i64 {
    client
        .query_one("SELECT count(*) FROM jq_jobs WHERE queue_name = $1 AND status IN ('pending', 'running')", &[&queue])
        .unwrap()
        .get(0)
}

/// Entries of the claim index that the claims of `f` read (`idx_tup_read`: index entries returned
/// to the scan, live or not), as counted once `client`'s statistics are flushed.
fn claim_index_entries_read(client: &mut Client, admin: &mut Client, f: impl FnOnce(&mut Client)) -> i64 {
    let read = |admin: &mut Client| -> i64 {
        admin.batch_execute("SELECT pg_stat_clear_snapshot()").unwrap();
        admin
            .query_one("SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelname = 'jq_live_jobs_claim'", &[])
            .unwrap()
            .get(0)
    };
    client.batch_execute("SELECT pg_stat_force_next_flush()").unwrap();
    client.batch_execute("SELECT 1").unwrap();
    let before = read(admin);
    f(client);
    // The flush happens when the session next goes idle.
    client.batch_execute("SELECT pg_stat_force_next_flush()").unwrap();
    client.batch_execute("SELECT 1").unwrap();
    let mut after = read(admin);
    wait_until("the claims' statistics are flushed", || {
        after = read(admin);
        after > before
    });
    after - before
}

/// 3,000 jobs; a REPEATABLE READ session takes its snapshot; 2,000 are claimed and completed; then
/// the entries that 50 single claims read.
pub fn entries_read_behind_an_old_snapshot(cluster: &Cluster) -> i64 {
    let mut client = cluster.connect();
    let mut admin = cluster.connect();
    let mut old = cluster.connect();
    enqueue_many(&mut client, "q", 3000);
    old.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM jq_jobs;").unwrap();
    for _ in 0..20 {
        client
            .batch_execute(
                "SELECT jq_complete_batch(array_agg(id), 'w', array_agg(lease_token))
                 FROM jq_claim('q', 'w', batch_size => 100)",
            )
            .unwrap();
    }
    let read = claim_index_entries_read(&mut client, &mut admin, |client| {
        for _ in 0..50 {
            let (id, token) = claim(client, "q", "w", "1 minute").expect("a pending job");
            assert!(complete(client, id, "w", token));
        }
    });
    old.batch_execute("COMMIT").unwrap();
    read
}
