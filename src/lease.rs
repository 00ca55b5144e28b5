//! The lease holder's verbs: jq_heartbeat, jq_complete, jq_fail. Each acts only while the job runs
//! under this worker's unexpired lease with this token; otherwise it changes nothing and returns false.
//!
//! The caller needs `consume` on the job's queue. The queue is known only from the row, so each
//! verb makes its guarded change first and checks the right on the queue it returns: without the
//! right the call raises 42501, which undoes the change. That costs the hot path no extra statement.

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use crate::stats::{self, Counter};
use crate::rights::{self, Privilege};
use crate::{clock, input, plans};

const HEARTBEAT: &str = include_str!("../sql/queries/heartbeat.sql");
const COMPLETE: &str = include_str!("../sql/queries/complete.sql");
const COMPLETE_BATCH: &str = include_str!("../sql/queries/complete_batch.sql");
const FAIL: &str = include_str!("../sql/queries/fail.sql");
const JOB_QUEUE: &str = include_str!("../sql/queries/job_queue.sql");

/// Extends the lease to now + `extend` (default: the length it was claimed with), never past the
/// queue's maximum runtime counted from this attempt's claim.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_heartbeat(
    job_id: Option<i64>,
    worker: Option<&str>,
    lease_token: Option<i64>,
    extend: default!(Option<Interval>, "NULL"),
) -> spi::Result<bool> {
    let now = clock::now();
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let extend = input::lease_length("extend", extend, now);
    rights::as_owner(|| {
        Spi::connect_mut(|client| {
            let args = [job_id.into(), worker.into(), lease_token.into(), extend.into(), now.into()];
            let rows = plans::run(client, HEARTBEAT, &args)?;
            let Some(row) = rows.into_iter().next() else {
                count_refused(client, vec![job_id], Counter::StaleHeartbeats)?;
                return Ok(false);
            };
            rights::require(&required::<String>(row.get(1)?), Privilege::Consume);
            Ok(true)
        })
    })
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_complete(job_id: Option<i64>, worker: Option<&str>, lease_token: Option<i64>) -> spi::Result<bool> {
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let now = clock::now();
    rights::as_owner(|| {
        Spi::connect_mut(|client| {
            let rows = plans::run(client, COMPLETE, &[job_id.into(), worker.into(), lease_token.into(), now.into()])?;
            let Some((queue_name, claimed_at)) = queue_and_claim_time(rows, 1)?.pop() else {
                count_refused(client, vec![job_id], Counter::StaleCompletions)?;
                return Ok(false);
            };
            rights::require(&queue_name, Privilege::Consume);
            count_completion(&queue_name, claimed_at, now);
            Ok(true)
        })
    })
}

/// The queue name and claim time in columns `first` and `first + 1` of each row.
fn queue_and_claim_time(rows: spi::SpiTupleTable, first: usize) -> spi::Result<Vec<(String, TimestampWithTimeZone)>> {
    rows.map(|row| Ok((required(row.get(first)?), required(row.get(first + 1)?)))).collect()
}

fn count_completion(queue_name: &str, claimed_at: TimestampWithTimeZone, now: TimestampWithTimeZone) {
    stats::completed(queue_name, micros(now) - micros(claimed_at));
}

fn micros(at: TimestampWithTimeZone) -> i64 {
    pg_sys::TimestampTz::from(at)
}

/// A refused call: raises 42501 if the caller lacks `consume` on a job's queue (so that a call
/// without the right is refused the same whether its token was right or not), and otherwise counts
/// it against the queue (a job that does not exist counts nowhere). Refusals are rare, so the
/// lookup costs the hot path nothing.
fn count_refused(client: &mut spi::SpiClient, job_ids: Vec<i64>, counter: Counter) -> spi::Result<()> {
    for row in plans::run(client, JOB_QUEUE, &[job_ids.into()])? {
        let queue_name: String = required(row.get(1)?);
        rights::require(&queue_name, Privilege::Consume);
        stats::count(&queue_name, counter);
    }
    Ok(())
}

/// Columns that the queries return from NOT NULL columns of jq_jobs.
fn required<T>(value: Option<T>) -> T {
    value.expect("a NOT NULL column")
}

/// jq_complete for a batch, in one statement: `lease_tokens[i]` is the token of `job_ids[i]`. Each job
/// is completed under jq_complete's guard; returns the ids it completed, in no particular order.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_complete_batch(
    job_ids: Option<Vec<Option<i64>>>,
    worker: Option<&str>,
    lease_tokens: Option<Vec<Option<i64>>>,
) -> spi::Result<TableIterator<'static, (name!(id, i64),)>> {
    let (job_ids, lease_tokens) = input::job_batch(job_ids, lease_tokens);
    let worker = input::worker(worker);
    let now = clock::now();
    let args = [job_ids.clone().into(), worker.into(), lease_tokens.into(), now.into(), "running".into()];
    let completed = rights::as_owner(|| Spi::connect_mut(|client| {
        let mut completed = Vec::new();
        for row in plans::run(client, COMPLETE_BATCH, &args)? {
            let id: i64 = required(row.get(1)?);
            let queue_name: String = required(row.get(2)?);
            rights::require(&queue_name, Privilege::Consume);
            count_completion(&queue_name, required(row.get(3)?), now);
            completed.push(id);
        }
        if completed.len() < job_ids.len() {
            let refused = job_ids.iter().copied().filter(|id| !completed.contains(id)).collect();
            count_refused(client, refused, Counter::StaleCompletions)?;
        }
        Ok::<_, spi::Error>(completed)
    }))?;
    Ok(TableIterator::new(completed.into_iter().map(|id| (id,))))
}

/// Records a failed attempt. Not retryable, or no attempts left: the job is dead. Otherwise it is
/// pending again after `retry_in`, or after the queue's exponential backoff with jitter.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
#[allow(clippy::too_many_arguments)]
fn jq_fail(
    job_id: Option<i64>,
    worker: Option<&str>,
    lease_token: Option<i64>,
    error_code: Option<&str>,
    error_message: default!(Option<&str>, "NULL"),
    retryable: default!(Option<bool>, true),
    retry_in: default!(Option<Interval>, "NULL"),
) -> spi::Result<bool> {
    let now = clock::now();
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let error_code = input::error_code(error_code);
    let error_message = input::error_message(error_message);
    let retryable = input::retryable(retryable);
    let retry_in = input::retry_in(retry_in, now);
    rights::as_owner(|| Spi::connect_mut(|client| {
        let args = [
            job_id.into(),
            worker.into(),
            lease_token.into(),
            error_code.into(),
            error_message.into(),
            retryable.into(),
            retry_in.into(),
            now.into(),
        ];
        let rows = plans::run(client, FAIL, &args)?;
        let Some(row) = rows.into_iter().next() else {
            count_refused(client, vec![job_id], Counter::StaleCompletions)?;
            return Ok(false);
        };
        let queue_name: String = required(row.get(2)?);
        rights::require(&queue_name, Privilege::Consume);
        stats::failure(&queue_name, error_code);
        stats::count(&queue_name, if required(row.get(3)?) { Counter::Deaths } else { Counter::Retries });
        Ok(true)
    }))
}
