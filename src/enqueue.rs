//! jq_enqueue and jq_enqueue_batch: new pending jobs.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;

use crate::payload::Payload;
use crate::spi_util::first_value;
use crate::rights::{self, Privilege};
use crate::{clock, input, plans, wake};

const INSERT: &str = include_str!("../sql/queries/enqueue.sql");
const INSERT_UNLESS_KEY_HELD: &str = include_str!("../sql/queries/enqueue_dedup.sql");
const LIVE_HOLDER_OF_KEY: &str = include_str!("../sql/queries/enqueue_existing.sql");
const INSERT_BATCH: &str = include_str!("../sql/queries/enqueue_batch.sql");

/// Enqueues one job and returns its id. With a dedup key held by a live (pending or running) job of
/// the queue, returns that job's id and inserts nothing.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_enqueue(
    queue_name: Option<&str>,
    payload: Option<Payload>,
    priority: default!(Option<i32>, 0),
    run_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    max_attempts: default!(Option<i32>, "NULL"),
    dedup_key: default!(Option<&str>, "NULL"),
    ordering_key: default!(Option<&str>, "NULL"),
) -> spi::Result<i64> {
    let queue_name = input::queue_name(queue_name);
    let payload = input::payload("payload", payload);
    let priority = input::priority(priority);
    let run_at = input::run_at(run_at);
    let max_attempts = input::max_attempts(max_attempts);
    let dedup_key = input::key("dedup_key", dedup_key);
    let ordering_key = input::key("ordering_key", ordering_key);
    rights::require(queue_name, Privilege::Enqueue);
    let now = clock::now();

    let insert = if dedup_key.is_some() { INSERT_UNLESS_KEY_HELD } else { INSERT };
    rights::as_owner(|| Spi::connect_mut(|client| loop {
        let inserted = plans::run(
            client,
            insert,
            &[
                queue_name.into(),
                payload.into(),
                priority.into(),
                run_at.into(),
                max_attempts.into(),
                dedup_key.into(),
                ordering_key.into(),
                now.into(),
            ],
        )?;
        if let Some(id) = first_value::<i64>(inserted)? {
            wake::after_enqueue(client, queue_name)?;
            return Ok(id);
        }
        // A live job holds the key. It may finish between the two statements; then the key is free
        // and the insert is tried again. Run read-write (as plans::run does), so that the lookup
        // takes a fresh snapshot: a read-only one would reuse the calling statement's, which may
        // predate the holder, and the loop would never end.
        let holder = plans::run(client, LIVE_HOLDER_OF_KEY, &[queue_name.into(), dedup_key.into()])?;
        if let Some(id) = first_value::<i64>(holder)? {
            return Ok(id);
        }
    }))
}

/// Enqueues many jobs in one statement; returns their ids in input order.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_enqueue_batch(
    queue_name: Option<&str>,
    payloads: Option<Vec<Option<Payload>>>,
    priority: default!(Option<i32>, 0),
    run_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    max_attempts: default!(Option<i32>, "NULL"),
) -> spi::Result<SetOfIterator<'static, i64>> {
    let queue_name = input::queue_name(queue_name);
    let payloads = input::payloads(payloads);
    let priority = input::priority(priority);
    let run_at = input::run_at(run_at);
    let max_attempts = input::max_attempts(max_attempts);
    rights::require(queue_name, Privilege::Enqueue);
    let now = clock::now();

    let ids = rights::as_owner(|| Spi::connect_mut(|client| {
        let rows = plans::run(
            client,
            INSERT_BATCH,
            &[queue_name.into(), payloads.into(), priority.into(), run_at.into(), max_attempts.into(), now.into()],
        )?;
        let ids = rows
            .map(|row| row.get::<i64>(1).map(|id| id.expect("jq_jobs.id is NOT NULL")))
            .collect::<spi::Result<Vec<i64>>>()?;
        if !ids.is_empty() {
            wake::after_enqueue(client, queue_name)?;
        }
        Ok::<_, spi::Error>(ids)
    }))?;
    Ok(SetOfIterator::new(ids))
}
