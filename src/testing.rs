//! What the `#[pg_test]` modules beside each file share: reading one value, running a statement,
//! and the queue verbs in their plainest form. Each test runs in its own transaction, rolled back
//! afterwards. The server clock (`clock_timestamp()`) moves inside that transaction, which is what
//! lets these tests expire leases.

use pgrx::prelude::*;

/// Runs a query that returns one value.
pub fn one<T: FromDatum + IntoDatum>(sql: &str) -> T {
    Spi::get_one::<T>(sql).expect("query runs").expect("query returns a non-NULL value")
}

pub fn run(sql: &str) {
    Spi::run(sql).expect("statement runs");
}

pub fn event_count() -> i64 {
    one("SELECT count(*) FROM jq_job_events")
}

pub fn enqueue(queue: &str) -> i64 {
    Spi::get_one_with_args::<i64>("SELECT jq_enqueue($1, '{\"k\": 1}')", &[queue.into()]).unwrap().unwrap()
}

/// Claims one job; returns (id, lease_token).
pub fn claim(queue: &str, worker: &str, lease: &str) -> Option<(i64, i64)> {
    Spi::connect(|c| {
        let rows = c
            .select(
                "SELECT id, lease_token FROM jq_claim($1, $2, $3::interval)",
                None,
                &[queue.into(), worker.into(), lease.into()],
            )
            .unwrap();
        if rows.is_empty() {
            return None;
        }
        let (id, token) = rows.first().get_two::<i64, i64>().unwrap();
        Some((id.unwrap(), token.unwrap()))
    })
}

pub fn status(id: i64) -> String {
    Spi::get_one_with_args::<String>("SELECT status::text FROM jq_jobs WHERE id = $1", &[id.into()]).unwrap().unwrap()
}

pub fn call_bool(sql: &str, id: i64, worker: &str, token: i64) -> bool {
    Spi::get_one_with_args::<bool>(sql, &[id.into(), worker.into(), token.into()]).unwrap().unwrap()
}

pub fn complete(id: i64, worker: &str, token: i64) -> bool {
    call_bool("SELECT jq_complete($1, $2, $3)", id, worker, token)
}

pub fn heartbeat(id: i64, worker: &str, token: i64) -> bool {
    call_bool("SELECT jq_heartbeat($1, $2, $3)", id, worker, token)
}

pub fn fail(id: i64, worker: &str, token: i64) -> bool {
    call_bool("SELECT jq_fail($1, $2, $3, 'E_TEST', 'boom')", id, worker, token)
}

/// The job row as text, to compare "before" and "after" of a call that must change nothing.
pub fn row_text(id: i64) -> String {
    Spi::get_one_with_args::<String>("SELECT j::text FROM jq_jobs j WHERE id = $1", &[id.into()]).unwrap().unwrap()
}

pub fn sleep(seconds: f64) {
    Spi::run_with_args("SELECT pg_sleep($1)", &[seconds.into()]).unwrap();
}

pub fn make_dead(queue: &str, n: i32, code: &str) -> Vec<i64> {
    run(&format!("SELECT jq_enqueue_batch('{queue}', array_fill('{{}}'::jsonb, ARRAY[{n}]))"));
    (0..n)
        .map(|_| {
            let (id, token) = claim(queue, "w", "30 s").unwrap();
            assert!(one::<bool>(&format!("SELECT jq_fail({id}, 'w', {token}, '{code}', retryable => false)")));
            id
        })
        .collect()
}
