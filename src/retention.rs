//! Operations on many finished jobs at once, each bounded by `max_jobs` so that a large backlog is
//! worked off in short transactions: re-driving and purging dead jobs, and pruning old history.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;

use crate::rights::{self, Privilege};
use crate::spi_util::returned_count;
use crate::{clock, input};

const RETRY_DEAD: &str = include_str!("../sql/queries/retry_dead.sql");
const PURGE_DEAD: &str = include_str!("../sql/queries/purge_dead.sql");
const PRUNE: &str = include_str!("../sql/queries/prune.sql");
const PRUNE_CUTOFF: &str = include_str!("../sql/queries/prune_cutoff.sql");

/// Re-drives up to `max_jobs` dead jobs of a queue, optionally only those whose last error code is
/// `error_code`, each as `jq_retry` would. Returns how many.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_retry_dead(
    queue_name: Option<&str>,
    error_code: default!(Option<&str>, "NULL"),
    max_jobs: default!(Option<i32>, 1000),
) -> spi::Result<i32> {
    let queue_name = input::queue_name(queue_name);
    let max_jobs = input::max_jobs(max_jobs);
    rights::require(queue_name, Privilege::Manage);
    rights::as_owner(|| returned_count(RETRY_DEAD, &[queue_name.into(), error_code.into(), max_jobs.into(), clock::now().into()]))
}

/// Deletes up to `max_jobs` dead jobs of a queue, optionally only those with `error_code`, with
/// their events. Returns how many.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_purge_dead(
    queue_name: Option<&str>,
    error_code: default!(Option<&str>, "NULL"),
    max_jobs: default!(Option<i32>, 1000),
) -> spi::Result<i32> {
    let queue_name = input::queue_name(queue_name);
    let max_jobs = input::max_jobs(max_jobs);
    rights::require(queue_name, Privilege::Manage);
    rights::as_owner(|| returned_count(PURGE_DEAD, &[queue_name.into(), error_code.into(), max_jobs.into()]))
}

/// Deletes up to `max_jobs` succeeded or cancelled jobs older than their queue's retention, with
/// their events. Returns how many; call it until it returns less than `max_jobs`. Maintenance of
/// every queue: only those the owner grants EXECUTE may call it.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_prune(max_jobs: default!(Option<i32>, 10000)) -> spi::Result<i32> {
    let max_jobs = input::max_jobs(max_jobs);
    rights::as_owner(|| prune(max_jobs))
}

/// The body of `jq_prune`, also run by the background worker.
pub fn prune(max_jobs: i32) -> spi::Result<i32> {
    let now = clock::now();
    let cutoff = Spi::get_one_with_args::<TimestampWithTimeZone>(PRUNE_CUTOFF, &[now.into()])?;
    returned_count(PRUNE, &[max_jobs.into(), now.into(), cutoff.into()])
}
