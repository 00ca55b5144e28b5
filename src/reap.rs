//! Reaping: expired leases back to pending work (after backoff) or to dead. `jq_reap()`, the
//! background reaper and a claim's inline recovery all run `reap_expired`.

use pgrx::prelude::*;
use pgrx::spi;

use pgrx::datum::DatumWithOid;
use pgrx::pg_sys::PgOid;
use pgrx::spi::Query;

use crate::stats::{self, Counter};
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
///
/// Planned for these arguments on each call (one queue or all make different plans), and run
/// read-write without taking a transaction id up front: a reap that finds nothing writes nothing.
pub fn reap_expired(max_jobs: i32, queue_name: Option<&str>) -> spi::Result<i32> {
    let args: [DatumWithOid; 3] = [max_jobs.into(), clock::now().into(), queue_name.into()];
    let types: Vec<PgOid> = args.iter().map(|arg| PgOid::from(arg.oid())).collect();
    Spi::connect_mut(|client| {
        let statement = client.prepare_mut(REAP, &types)?;
        let mut reaped = 0;
        for row in Query::execute(&statement, client, None, &args)? {
            let queue_name: String = row.get(2)?.expect("jq_jobs.queue_name is NOT NULL");
            let dead: bool = row.get(3)?.expect("a status is NOT NULL");
            stats::count(&queue_name, Counter::LeaseExpirations);
            stats::count(&queue_name, if dead { Counter::Deaths } else { Counter::Retries });
            reaped += 1;
        }
        Ok(reaped)
    })
}
