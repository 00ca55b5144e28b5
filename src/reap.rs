//! jq_reap: expired leases back to pending work (after backoff) or to dead.

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
    let max_jobs = input::max_jobs(max_jobs);
    let now = clock::now();
    returned_count(REAP, &[max_jobs.into(), now.into()])
}
