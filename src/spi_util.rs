//! Small helpers over SPI used by every verb.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::pg_sys::PgOid;
use pgrx::spi::{self, Query};

use crate::plans;

/// Runs a guarded data-changing statement (with its session plan) and says whether it changed (or
/// returned) any row.
pub fn changed_any(sql: &'static str, args: &[DatumWithOid]) -> spi::Result<bool> {
    Spi::connect_mut(|client| Ok(!plans::run(client, sql, args)?.is_empty()))
}

/// Runs a data-changing statement bounded by a `max_jobs: i32` argument, and counts the rows it
/// returned (which the bound keeps within i32). Planned for these arguments, once: these run
/// rarely, and their best plan depends on the arguments (one queue or all).
///
/// Not `client.update()`, which assigns the transaction an id whether a row changes or not (see
/// plans.rs): a reap that finds nothing must not make the claim that ran it write a commit record.
pub fn returned_count(sql: &str, args: &[DatumWithOid]) -> spi::Result<i32> {
    let types: Vec<PgOid> = args.iter().map(|arg| PgOid::from(arg.oid())).collect();
    let rows = Spi::connect_mut(|client| {
        let statement = client.prepare_mut(sql, &types)?;
        Query::execute(&statement, client, None, args).map(|table| table.len())
    })?;
    Ok(i32::try_from(rows).expect("at most max_jobs rows"))
}

/// The first column of the first row, or None when there is no row (SPI itself errors on `first()`
/// of an empty result).
pub fn first_value<T: FromDatum + IntoDatum>(rows: spi::SpiTupleTable) -> spi::Result<Option<T>> {
    if rows.is_empty() {
        return Ok(None);
    }
    rows.first().get_one::<T>()
}
