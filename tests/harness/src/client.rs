//! The queue verbs and reads that many tests use, in their plainest form, for one client.

use postgres::{Client, NoTls};

use crate::Cluster;

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
