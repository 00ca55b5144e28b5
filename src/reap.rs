//! Reaping: expired leases back to pending work (after backoff) or to dead. `jq_reap()`, the
//! background reaper and a claim's inline recovery all run `reap_expired`.

use pgrx::prelude::*;
use pgrx::spi;

use crate::spi_util::returned_count;
use crate::{clock, input};

const REAP: &str = include_str!("../sql/queries/reap.sql");

/// Reaps up to `max_jobs` expired leases in one statement; returns how many it reaped. Rows that a
/// worker holds locked right now (it is completing them) are skipped, not waited for.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(@extschema@, pg_catalog, pg_temp)]
fn jq_reap(max_jobs: default!(Option<i32>, 10000)) -> spi::Result<i32> {
    reap_expired(input::max_jobs(max_jobs), None)
}

/// Reaps up to `max_jobs` expired leases, of one queue or of all. Expects the extension's schema on
/// the search_path (SQL functions pin it; the background worker sets it).
pub fn reap_expired(max_jobs: i32, queue_name: Option<&str>) -> spi::Result<i32> {
    returned_count(REAP, &[max_jobs.into(), clock::now().into(), queue_name.into()])
}
