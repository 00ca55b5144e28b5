//! The only place that runs SQL. Everything above it passes a statement's text (a `sql/queries/`
//! file) and its arguments, and gets back decoded rows.
//!
//! A transaction id is assigned to a transaction only when a row actually changes; the helpers
//! here keep it that way. pgrx's `client.update()`, `Spi::run` and `Spi::get_one` assign one up
//! front, whether the statement writes or not, so a claim that finds nothing would write and flush a
//! commit record, and a waiting claim would hold back VACUUM with its id while it sleeps. None of
//! them is used; the lint layer (`scripts/lint.sh`) keeps it so. The helpers:
//! - [`Session::rows`] / [`Session::first`]: the session plan of a hot statement (see `plans`),
//!   run read-write with a fresh snapshot, no transaction id up front.
//! - [`rows_planned_per_call`] / [`count_planned_per_call`]: planned for these arguments on every
//!   call, for rare statements whose best plan depends on them (one queue or all); read-write, no
//!   transaction id up front.
//! - [`read_only_rows`]: a read-only statement with the calling statement's snapshot, for catalog
//!   and figures reads; it can never take a transaction id.
//! - [`in_subtransaction`]: a step whose failure must not end the transaction.
//!
//! And [`read_committed`], the one answer to "does each statement here take a fresh snapshot?".

pub mod clock;
pub mod payload;
mod plans;
mod row;
pub mod status;
pub mod text;

use std::panic::AssertUnwindSafe;

use pgrx::datum::DatumWithOid;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::pg_sys::PgOid;
use pgrx::prelude::*;
use pgrx::spi::{self, Query, SpiClient};
use pgrx::PgSqlErrorCode;

pub use row::{Column, FromRow};

/// Whether the transaction runs in READ COMMITTED (or READ UNCOMMITTED, which PostgreSQL runs as
/// READ COMMITTED): each statement takes a fresh snapshot. In REPEATABLE READ and SERIALIZABLE
/// every statement sees the transaction's first snapshot, which is older than any lock taken
/// since, and than anything read from shared memory since.
pub fn read_committed() -> bool {
    // SAFETY: a plain read of the transaction's isolation level.
    unsafe { pg_sys::XactIsoLevel < pg_sys::XACT_REPEATABLE_READ as i32 }
}

/// One SPI connection, for the statements of one call.
pub struct Session<'a, 'conn> {
    client: &'a mut SpiClient<'conn>,
}

/// Runs `f` with an SPI connection; SPI disconnects when it returns (or unwinds).
pub fn connect<R>(f: impl FnOnce(&mut Session) -> spi::Result<R>) -> spi::Result<R> {
    Spi::connect_mut(|client| f(&mut Session { client }))
}

impl Session<'_, '_> {
    /// Every row of the statement `sql` (a `'static` text), run with its session plan.
    pub fn rows<T: FromRow>(&mut self, sql: &'static str, args: &[DatumWithOid]) -> spi::Result<Vec<T>> {
        plans::run(self.client, sql, args)?.map(|row| T::from_row(&row)).collect()
    }

    /// The first column of the first row, or None when there is no row.
    pub fn first<T: FromDatum + IntoDatum>(
        &mut self,
        sql: &'static str,
        args: &[DatumWithOid],
    ) -> spi::Result<Option<T>> {
        let rows = plans::run(self.client, sql, args)?;
        if rows.is_empty() {
            // SPI itself errors on `first()` of an empty result.
            return Ok(None);
        }
        rows.first().get_one::<T>()
    }
}

/// Runs a statement planned for these arguments, once, and decodes each row it returns: for
/// statements that run rarely and whose best plan depends on the arguments (one queue or all).
pub fn rows_planned_per_call<T: FromRow>(sql: &str, args: &[DatumWithOid]) -> spi::Result<Vec<T>> {
    let types: Vec<PgOid> = args.iter().map(|arg| PgOid::from(arg.oid())).collect();
    Spi::connect_mut(|client| {
        let statement = client.prepare_mut(sql, &types)?;
        Query::execute(&statement, client, None, args)?.map(|row| T::from_row(&row)).collect()
    })
}

/// `rows_planned_per_call` for a data-changing statement bounded by a `max_jobs: i32` argument:
/// how many rows it returned (which the bound keeps within i32).
pub fn count_planned_per_call(sql: &str, args: &[DatumWithOid]) -> spi::Result<i32> {
    let rows = rows_planned_per_call::<()>(sql, args)?;
    Ok(i32::try_from(rows.len()).expect("at most max_jobs rows"))
}

/// A read-only statement, with the snapshot of the statement that called the function.
pub fn read_only_rows<T: FromRow>(sql: &str, args: &[DatumWithOid]) -> spi::Result<Vec<T>> {
    Spi::connect(|client| client.select(sql, None, args)?.map(|row| T::from_row(&row)).collect())
}

/// Runs `f` in a subtransaction: its changes stay if it succeeds, and are undone if it fails, in
/// which case the error is returned as its message and the transaction goes on. What it noted for
/// the counters and wake-ups is undone with it (see `shared::xact`).
///
/// A cancel, a statement or lock timeout, a shutdown or a lack of memory is no failure of `f`'s
/// own: it is raised again as it came once the subtransaction is undone, and ends the statement
/// with its own SQLSTATE (57014 for a cancel or a timeout), never turned into a refusal.
pub fn in_subtransaction<T>(f: impl FnOnce() -> spi::Result<T>) -> Result<T, String> {
    subtransaction(f, not_ours)
}

/// As `in_subtransaction`, for a step whose only failures of its own are bad values (a function
/// that writes what its caller gave it): only a data exception (class 22) or an integrity
/// constraint violation (class 23) comes back as its message. Anything else (a lock timeout, a
/// deadlock, a serialization failure, besides what `in_subtransaction` raises again) is raised
/// again as it came, with its own SQLSTATE, once the subtransaction is undone.
pub fn refusing_bad_values<T>(f: impl FnOnce() -> spi::Result<T>) -> Result<T, String> {
    subtransaction(f, |error| !bad_value(error))
}

/// Whether a caught error is a data exception (22) or an integrity constraint violation (23).
fn bad_value(error: &CaughtError) -> bool {
    let class = class_of(error);
    [PgSqlErrorCode::ERRCODE_DATA_EXCEPTION, PgSqlErrorCode::ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION]
        .iter()
        .any(|refusal| *refusal as i32 & 0xFFF == class)
}

/// A caught error's SQLSTATE class: the first two characters, the low 12 bits of its code.
fn class_of(error: &CaughtError) -> i32 {
    let report = match error {
        CaughtError::PostgresError(report)
        | CaughtError::ErrorReport(report)
        | CaughtError::RustPanic { ereport: report, .. } => report,
    };
    report.sql_error_code() as i32 & 0xFFF
}

/// `f` in a subtransaction; an error it raises for which `raise_again` holds is raised again once
/// the subtransaction is undone, any other comes back as its message.
fn subtransaction<T>(f: impl FnOnce() -> spi::Result<T>, raise_again: fn(&CaughtError) -> bool) -> Result<T, String> {
    // SAFETY: reads two backend globals, restored below: PostgreSQL's own subtransaction calls
    // switch both, and a caller's SPI connection and memory must survive the step.
    let (context, owner) = unsafe { (pg_sys::CurrentMemoryContext, pg_sys::CurrentResourceOwner) };
    // SAFETY: called inside a transaction (every SQL function and reaper pass is); the matching
    // release or rollback follows on every path, since `PgTryBuilder` catches the errors.
    unsafe { pg_sys::BeginInternalSubTransaction(std::ptr::null()) };
    let result = PgTryBuilder::new(AssertUnwindSafe(|| f().map_err(|e| Failed::Message(e.to_string()))))
        .catch_others(|error| Err(Failed::Caught(Box::new(error))))
        .execute();
    // SAFETY: ends the subtransaction begun above (it is the current one: `f` ended any of its
    // own), then restores what PostgreSQL's subtransaction calls switched.
    unsafe {
        if result.is_ok() {
            pg_sys::ReleaseCurrentSubTransaction();
        } else {
            pg_sys::RollbackAndReleaseCurrentSubTransaction();
        }
        pg_sys::MemoryContextSwitchTo(context);
        pg_sys::CurrentResourceOwner = owner;
    }
    result.map_err(|failed| match failed {
        Failed::Message(message) => message,
        Failed::Caught(error) if raise_again(&error) => error.rethrow(),
        Failed::Caught(error) => describe(*error),
    })
}

enum Failed {
    Message(String),
    Caught(Box<CaughtError>),
}

/// Whether a caught error comes from outside the step: an operator's intervention (a cancel, a
/// timeout, a shutdown: class 57) or the server running short of something (class 53).
pub fn not_ours(error: &CaughtError) -> bool {
    let class = class_of(error);
    [PgSqlErrorCode::ERRCODE_OPERATOR_INTERVENTION, PgSqlErrorCode::ERRCODE_INSUFFICIENT_RESOURCES]
        .iter()
        .any(|outside| *outside as i32 & 0xFFF == class)
}

/// The message of a caught error.
pub fn describe(error: CaughtError) -> String {
    match error {
        CaughtError::PostgresError(report)
        | CaughtError::ErrorReport(report)
        | CaughtError::RustPanic { ereport: report, .. } => report.message().to_owned(),
    }
}

/// A background worker's own transaction, with a snapshot for its statements.
pub fn begin_worker_transaction() {
    // SAFETY: only in a background worker between transactions; `commit_worker_transaction` or
    // an abort ends it.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
}

pub fn commit_worker_transaction() {
    // SAFETY: ends what `begin_worker_transaction` began: the snapshot it pushed, then the transaction.
    unsafe {
        pg_sys::PopActiveSnapshot();
        pg_sys::CommitTransactionCommand();
    }
}

/// Aborts a background worker's transaction after an error it caught.
pub fn abort_worker_transaction() {
    // SAFETY: the worker's transaction is open (begun by `begin_worker_transaction`) or already
    // aborted by the error; AbortCurrentTransaction handles both.
    unsafe { pg_sys::AbortCurrentTransaction() };
}
