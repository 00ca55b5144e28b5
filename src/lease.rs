//! The lease holder's verbs: jq_heartbeat, jq_complete, jq_fail. Each acts only while the job runs
//! under this worker's unexpired lease with this token; otherwise it changes nothing and returns false.

use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::spi;

use crate::spi_util::changed_any;
use crate::{clock, input, plans};

const HEARTBEAT: &str = include_str!("../sql/queries/heartbeat.sql");
const COMPLETE: &str = include_str!("../sql/queries/complete.sql");
const COMPLETE_BATCH: &str = include_str!("../sql/queries/complete_batch.sql");
const FAIL: &str = include_str!("../sql/queries/fail.sql");

/// Extends the lease to now + `extend` (default: the length it was claimed with), never past the
/// queue's maximum runtime counted from this attempt's claim.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(@extschema@, pg_catalog, pg_temp)]
fn jq_heartbeat(
    job_id: Option<i64>,
    worker: Option<&str>,
    lease_token: Option<i64>,
    extend: default!(Option<Interval>, "NULL"),
) -> spi::Result<bool> {
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let extend = input::lease_length("extend", extend);
    let now = clock::now();
    changed_any(HEARTBEAT, &[job_id.into(), worker.into(), lease_token.into(), extend.into(), now.into()])
}

#[pg_extern(volatile, parallel_unsafe)]
#[search_path(@extschema@, pg_catalog, pg_temp)]
fn jq_complete(job_id: Option<i64>, worker: Option<&str>, lease_token: Option<i64>) -> spi::Result<bool> {
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let now = clock::now();
    changed_any(COMPLETE, &[job_id.into(), worker.into(), lease_token.into(), now.into()])
}

/// jq_complete for a batch, in one statement: `lease_tokens[i]` is the token of `job_ids[i]`. Each job
/// is completed under jq_complete's guard; returns the ids it completed, in no particular order.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(@extschema@, pg_catalog, pg_temp)]
fn jq_complete_batch(
    job_ids: Option<Vec<Option<i64>>>,
    worker: Option<&str>,
    lease_tokens: Option<Vec<Option<i64>>>,
) -> spi::Result<TableIterator<'static, (name!(id, i64),)>> {
    let (job_ids, lease_tokens) = input::job_batch(job_ids, lease_tokens);
    let worker = input::worker(worker);
    let now = clock::now();
    let args = [job_ids.into(), worker.into(), lease_tokens.into(), now.into(), "running".into()];
    let completed = Spi::connect_mut(|client| {
        plans::run(client, COMPLETE_BATCH, &args)?
            .map(|row| row.get::<i64>(1).map(|id| (id.expect("jq_jobs.id is NOT NULL"),)))
            .collect::<spi::Result<Vec<(i64,)>>>()
    })?;
    Ok(TableIterator::new(completed))
}

/// Records a failed attempt. Not retryable, or no attempts left: the job is dead. Otherwise it is
/// pending again after `retry_in`, or after the queue's exponential backoff with jitter.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(@extschema@, pg_catalog, pg_temp)]
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
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let error_code = input::error_code(error_code);
    let error_message = input::error_message(error_message);
    let retryable = input::retryable(retryable);
    let retry_in = input::retry_in(retry_in);
    let now = clock::now();
    changed_any(
        FAIL,
        &[
            job_id.into(),
            worker.into(),
            lease_token.into(),
            error_code.into(),
            error_message.into(),
            retryable.into(),
            retry_in.into(),
            now.into(),
        ],
    )
}
