//! Small helpers over SPI used by every verb.

use std::panic::AssertUnwindSafe;

use pgrx::datum::DatumWithOid;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::pg_sys::PgOid;
use pgrx::spi::{self, Query};


/// Runs a statement planned for these arguments, once, and decodes each row it returns: for
/// statements that run rarely and whose best plan depends on the arguments (one queue or all).
///
/// Not `client.update()`, which assigns the transaction an id whether a row changes or not (see
/// plans.rs): a reap that finds nothing must not make the claim that ran it write a commit record.
pub fn rows_planned_per_call<T>(
    sql: &str,
    args: &[DatumWithOid],
    decode: impl Fn(&spi::SpiHeapTupleData) -> spi::Result<T>,
) -> spi::Result<Vec<T>> {
    let types: Vec<PgOid> = args.iter().map(|arg| PgOid::from(arg.oid())).collect();
    Spi::connect_mut(|client| {
        let statement = client.prepare_mut(sql, &types)?;
        Query::execute(&statement, client, None, args)?.map(|row| decode(&row)).collect()
    })
}

/// `rows_planned_per_call` for a data-changing statement bounded by a `max_jobs: i32` argument:
/// how many rows it returned (which the bound keeps within i32).
pub fn returned_count(sql: &str, args: &[DatumWithOid]) -> spi::Result<i32> {
    let rows = rows_planned_per_call(sql, args, |_| Ok(()))?;
    Ok(i32::try_from(rows.len()).expect("at most max_jobs rows"))
}

/// The first column of the first row, or None when there is no row (SPI itself errors on `first()`
/// of an empty result).
pub fn first_value<T: FromDatum + IntoDatum>(rows: spi::SpiTupleTable) -> spi::Result<Option<T>> {
    if rows.is_empty() {
        return Ok(None);
    }
    rows.first().get_one::<T>()
}

/// Runs `f` in a subtransaction: its changes stay if it succeeds, and are undone if it fails, in
/// which case the error is returned as its message and the transaction goes on. What it noted for
/// the counters is undone with it.
pub fn in_subtransaction<T>(f: impl FnOnce() -> spi::Result<T>) -> Result<T, String> {
    let (context, owner) = unsafe { (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner) };
    let noted = crate::stats::noted();
    unsafe { pg_sys::BeginInternalSubTransaction(std::ptr::null()) };
    let result = PgTryBuilder::new(AssertUnwindSafe(|| f().map_err(|e| e.to_string())))
        .catch_others(|error| Err(describe(error)))
        .execute();
    unsafe {
        if result.is_ok() {
            pg_sys::ReleaseCurrentSubTransaction();
        } else {
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
            crate::stats::forget_since(noted);
        }
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
    }
    result
}

/// The message of a caught error.
pub fn describe(error: CaughtError) -> String {
    match error {
        CaughtError::PostgresError(report) | CaughtError::ErrorReport(report) | CaughtError::RustPanic { ereport: report, .. } => {
            report.message().to_owned()
        }
    }
}
