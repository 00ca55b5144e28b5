//! Reaping: expired leases back to pending work (after backoff) or to dead. `jq_reap()`, the
//! background reaper and a claim's inline recovery all run `reap_expired`.
//!
//! One row must never stop reaping for everyone: a statement that fails on one row fails for all
//! of them. So a pass runs in a subtransaction, and when it fails, the expired rows are reaped one
//! by one, each in a subtransaction of its own. A row that fails on its own is logged (once per
//! session), and this session's later passes leave it out for `SKIP_FOR`, then try it again: a
//! fault that is mended (a trigger dropped, a constraint fixed) lets the row be reaped.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use pgrx::datum::{DatumWithOid, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use crate::spi_util::{in_subtransaction, rows_planned_per_call};
use crate::stats::{self, Counter};
use crate::{clock, input};

const REAP: &str = include_str!("../sql/queries/reap.sql");
const EXPIRED: &str = include_str!("../sql/queries/reap_expired_ids.sql");

/// How long a row whose reap failed on its own is left out before it is tried again: long enough
/// that it costs the passes nothing, short enough that a mended row is reaped soon.
const SKIP_FOR: Duration = Duration::from_secs(10);

thread_local! {
    /// Jobs whose reap failed on their own in this session, and when. A backend is one thread.
    static SKIPPED: RefCell<BTreeMap<i64, Instant>> = const { RefCell::new(BTreeMap::new()) };
    /// Jobs whose failure this session has logged.
    static LOGGED: RefCell<BTreeSet<i64>> = const { RefCell::new(BTreeSet::new()) };
}

/// Reaps up to `max_jobs` expired leases in one statement; returns how many it reaped. Rows that a
/// worker holds locked right now (it is completing them) are skipped, not waited for. Maintenance
/// of every queue: only those the owner grants EXECUTE may call it.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_reap(max_jobs: default!(Option<i32>, 10000)) -> spi::Result<i32> {
    let max_jobs = input::max_jobs(max_jobs);
    crate::rights::as_owner(|| reap_expired(max_jobs, None, clock::now()))
}

/// Reaps up to `max_jobs` leases expired at `now`, of one queue or of all. Expects the extension's
/// schema on the search_path (SQL functions pin it; the background worker sets it).
pub fn reap_expired(max_jobs: i32, queue_name: Option<&str>, now: TimestampWithTimeZone) -> spi::Result<i32> {
    let skipped: Vec<i64> = SKIPPED.with(|skipped| {
        let mut skipped = skipped.borrow_mut();
        skipped.retain(|_, at| at.elapsed() < SKIP_FOR);
        skipped.keys().copied().collect()
    });
    if let Ok(reaped) = in_subtransaction(|| reap(max_jobs, now, queue_name, &skipped, None)) {
        return Ok(reaped);
    }
    let ids = rows_planned_per_call(EXPIRED, &[max_jobs.into(), now.into(), queue_name.into(), skipped.clone().into()], |row| {
        Ok(row.get::<i64>(1)?.expect("jq_jobs.id is NOT NULL"))
    })?;
    let mut reaped = 0;
    for id in ids {
        match in_subtransaction(|| reap(1, now, queue_name, &skipped, Some(id))) {
            Ok(n) => reaped += n,
            Err(message) => {
                if LOGGED.with(|logged| logged.borrow_mut().insert(id)) {
                    warning!("pg_jobqueue: the expired lease of job {id} could not be reaped; the others were, and it is tried again every {} s: {message}", SKIP_FOR.as_secs());
                }
                SKIPPED.with(|skipped| skipped.borrow_mut().insert(id, Instant::now()));
            }
        }
    }
    Ok(reaped)
}

/// One reap statement: up to `max_jobs` expired leases (only job `only`, if given), not those of
/// `skipped`. Planned for these arguments on each call (one queue or all make different plans), and
/// run read-write without taking a transaction id up front: a reap that finds nothing writes nothing.
fn reap(max_jobs: i32, now: TimestampWithTimeZone, queue_name: Option<&str>, skipped: &[i64], only: Option<i64>) -> spi::Result<i32> {
    let args: [DatumWithOid; 5] = [max_jobs.into(), now.into(), queue_name.into(), skipped.to_vec().into(), only.into()];
    let rows = rows_planned_per_call(REAP, &args, |row| {
        let queue_name: String = row.get(2)?.expect("jq_jobs.queue_name is NOT NULL");
        let dead: bool = row.get(3)?.expect("a status is NOT NULL");
        Ok((queue_name, dead))
    })?;
    for (queue_name, dead) in &rows {
        stats::count(queue_name, Counter::LeaseExpirations);
        stats::count(queue_name, if *dead { Counter::Deaths } else { Counter::Retries });
    }
    Ok(i32::try_from(rows.len()).expect("at most max_jobs rows"))
}
