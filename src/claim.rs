//! jq_claim: take claimable jobs under a lease.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use pgrx::datum::{DatumWithOid, Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi::{self, SpiClient};

use crate::payload::Payload;
use crate::spi_util::first_value;
use crate::{clock, guc, input, plans, reap, reaper};

const CLAIM: &str = include_str!("../sql/queries/claim.sql");
const ADMIT: &str = include_str!("../sql/queries/claim_admit.sql");
const RUNNING: &str = include_str!("../sql/queries/claim_running.sql");

/// One claimed job, in the column order of jq_claim's result.
type ClaimedJob = (i64, String, Payload, i32, i32, i32, i64, TimestampWithTimeZone);

/// Claims up to `batch_size` claimable jobs of the queue in one statement that never waits on a row
/// another claimer holds. Returns no rows when nothing is claimable.
///
/// A queue with a concurrency limit claims nothing in that first statement. Only then, when the first
/// statement came back empty, does the claim look for a limit: it takes the queue's row lock and
/// claims again within the free slots. Queues without a limit never take that lock, and a successful
/// claim of theirs costs nothing extra.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(@extschema@, pg_catalog, pg_temp)]
fn jq_claim(
    queue_name: Option<&str>,
    worker: Option<&str>,
    lease: default!(Option<Interval>, "NULL"),
    batch_size: default!(Option<i32>, 1),
) -> spi::Result<
    TableIterator<
        'static,
        (
            name!(id, i64),
            name!(queue_name, String),
            name!(payload, Payload),
            name!(priority, i32),
            name!(attempt_count, i32),
            name!(max_attempts, i32),
            name!(lease_token, i64),
            name!(lease_expires_at, TimestampWithTimeZone),
        ),
    >,
> {
    let queue_name = input::queue_name(queue_name);
    let worker = input::worker(worker);
    let lease = input::lease_length("lease", lease);
    let batch_size = input::batch_size(batch_size);
    recover_expired_leases(queue_name)?;
    let now = clock::now();

    let args = |batch_size: i32, admitted: bool| -> [DatumWithOid<'static>; 6] {
        [queue_name.into(), worker.into(), lease.into(), batch_size.into(), now.into(), admitted.into()]
    };
    let mut jobs = Spi::connect_mut(|client| {
        let jobs = claim_rows(client, &args(batch_size, false))?;
        if !jobs.is_empty() {
            return Ok(jobs);
        }
        // Taking the row lock is also the test for a limit: it returns no row for an unlimited queue.
        let Some(limit) = first_value::<i32>(plans::run(client, ADMIT, &[queue_name.into()])?)? else {
            return Ok(jobs);
        };
        let running = first_value::<i64>(plans::run(client, RUNNING, &[queue_name.into()])?)?.unwrap_or(0);
        let free = i64::from(limit) - running;
        if free <= 0 {
            return Ok(jobs);
        }
        claim_rows(client, &args(batch_size.min(free as i32), true))
    })?;
    jobs.sort_unstable_by_key(|(_, order)| *order);
    Ok(TableIterator::new(jobs.into_iter().map(|(job, _)| job)))
}

/// Inline recovery, for deployments with neither the background reaper nor pg_cron: a claim first
/// reaps a few expired leases of its own queue, so a queue that has live workers always recovers.
/// Skipped where a background reaper serves the database, and done at most once per
/// `inline_reap_interval` per session and queue, which is all recovery needs.
fn recover_expired_leases(queue_name: &str) -> spi::Result<()> {
    let max = guc::INLINE_REAP_MAX.get();
    if max == 0 || reaper::serves_this_database() || !inline_reap_due(queue_name) {
        return Ok(());
    }
    reap::reap_expired(max, Some(queue_name)).map(|_| ())
}

thread_local! {
    /// When this session last recovered each queue inline. A backend is one thread.
    static LAST_INLINE_REAP: RefCell<HashMap<String, Instant>> = RefCell::new(HashMap::new());
}

fn inline_reap_due(queue_name: &str) -> bool {
    let every = Duration::from_millis(guc::INLINE_REAP_INTERVAL_MS.get() as u64);
    LAST_INLINE_REAP.with(|last| {
        let mut last = last.borrow_mut();
        if last.get(queue_name).is_some_and(|at| at.elapsed() < every) {
            return false;
        }
        last.insert(queue_name.to_owned(), Instant::now());
        true
    })
}

fn claim_rows(client: &mut SpiClient, args: &[DatumWithOid]) -> spi::Result<Vec<(ClaimedJob, ClaimOrder)>> {
    plans::run(client, CLAIM, args)?.map(|row| decode_claimed(&row)).collect()
}

/// Claim order as a sort key: starving jobs first, oldest first; then `priority DESC, available_at, id`.
type ClaimOrder = (bool, std::cmp::Reverse<i32>, pg_sys::TimestampTz, i64);

fn decode_claimed(row: &spi::SpiHeapTupleData) -> spi::Result<(ClaimedJob, ClaimOrder)> {
    let id: i64 = required(row.get(1)?);
    let priority: i32 = required(row.get(4)?);
    let available_at: TimestampWithTimeZone = required(row.get(9)?);
    let starved: bool = required(row.get(10)?);
    let rank = if starved { 0 } else { priority };
    let job = (
        id,
        required(row.get(2)?),
        required(row.get(3)?),
        priority,
        required(row.get(5)?),
        required(row.get(6)?),
        required(row.get(7)?),
        required(row.get(8)?),
    );
    Ok((job, (!starved, std::cmp::Reverse(rank), available_at.into(), id)))
}

/// Every column the claim returns is NOT NULL for a running job (the table's constraints say so).
fn required<T>(value: Option<T>) -> T {
    value.expect("a claimed job's columns are not NULL")
}
