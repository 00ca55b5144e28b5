//! Operator actions on one job: jq_retry (re-drive) and jq_cancel. The caller needs `manage` on the
//! job's queue, checked on the queue the guarded change returns (see lease.rs).

use pgrx::prelude::*;
use pgrx::spi;

use crate::rights::{self, Privilege};
use crate::stats::{self, Counter};
use crate::{clock, input, plans};

const RETRY: &str = include_str!("../sql/queries/retry.sql");
const CANCEL: &str = include_str!("../sql/queries/cancel.sql");
const JOB_QUEUE: &str = include_str!("../sql/queries/job_queue.sql");

/// A dead or cancelled job becomes pending now: same id, history kept, a fresh attempt budget.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_retry(job_id: Option<i64>) -> spi::Result<bool> {
    let job_id = input::job_id(job_id);
    rights::as_owner(|| {
        Spi::connect_mut(|client| {
            let rows = plans::run(client, RETRY, &[job_id.into(), clock::now().into()])?;
            let Some(row) = rows.into_iter().next() else {
                return refused(client, job_id);
            };
            rights::require(&row.get::<String>(2)?.expect("jq_jobs.queue_name is NOT NULL"), Privilege::Manage);
            Ok(true)
        })
    })
}

/// A pending or running job becomes cancelled. A running job's lease is revoked with it, so its
/// worker's heartbeat and completion return false.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_cancel(job_id: Option<i64>) -> spi::Result<bool> {
    let job_id = input::job_id(job_id);
    rights::as_owner(|| {
        Spi::connect_mut(|client| {
            let rows = plans::run(client, CANCEL, &[job_id.into(), clock::now().into()])?;
            let Some(row) = rows.into_iter().next() else {
                return refused(client, job_id);
            };
            let queue_name: String = row.get(2)?.expect("jq_jobs.queue_name is NOT NULL");
            rights::require(&queue_name, Privilege::Manage);
            stats::count(&queue_name, Counter::Cancellations);
            Ok(true)
        })
    })
}

/// A job that was not in a state to change: false, or 42501 if the caller may not manage its queue
/// (refused the same whatever the job's state).
fn refused(client: &mut pgrx::spi::SpiClient, job_id: i64) -> spi::Result<bool> {
    for row in plans::run(client, JOB_QUEUE, &[vec![job_id].into()])? {
        rights::require(&row.get::<String>(1)?.expect("jq_jobs.queue_name is NOT NULL"), Privilege::Manage);
    }
    Ok(false)
}
