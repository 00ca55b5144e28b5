//! Symbols that older install scripts still call. A library is replaced in place, and the SQL
//! definitions of the version installed in a database call it until `ALTER EXTENSION UPDATE`
//! replaces them, so each symbol an older version declared is kept here, with why.

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use crate::api::claim::jq_claim_wait;
use crate::db::payload::Payload;

/// jq_claim as 0.1.0 declared it, without `wait`. 0.1.0's definition calls this symbol by name.
/// pgrx describes even a function it does not declare in SQL, so the result columns are spelled
/// out again.
#[allow(clippy::type_complexity)]
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn jq_claim(
    queue_name: Option<&str>,
    worker: Option<&str>,
    lease: Option<Interval>,
    batch_size: Option<i32>,
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
    jq_claim_wait(queue_name, worker, lease, batch_size, None)
}

/// jq_enqueue, jq_enqueue_batch, jq_complete and jq_complete_batch as 0.1.0 and 0.2.0 declared
/// them: 0.3.0 added trailing arguments their definitions do not pass. Until ALTER EXTENSION
/// UPDATE replaces those definitions, a call answers as every other verb does over an older
/// schema (55000), reading none of its arguments.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn jq_enqueue() -> i64 {
    crate::error::update_needed()
}

/// See `jq_enqueue` above.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn jq_enqueue_batch() -> Vec<i64> {
    crate::error::update_needed()
}

/// See `jq_enqueue` above.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn jq_complete() -> bool {
    crate::error::update_needed()
}

/// See `jq_enqueue` above.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn jq_complete_batch() -> Vec<i64> {
    crate::error::update_needed()
}

/// jq_enqueue and jq_enqueue_batch as 0.3.0 declared them: 0.4.0 added `depends_on`, which their
/// definitions do not pass. Until ALTER EXTENSION UPDATE, a call answers 55000 as above.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn jq_enqueue_job() -> i64 {
    crate::error::update_needed()
}

/// See `jq_enqueue_job` above.
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn jq_enqueue_jobs() -> Vec<i64> {
    crate::error::update_needed()
}

/// The event trigger function of 0.3.0's definitions (`jq_extension_dropped`, at the start of every
/// DROP EXTENSION), until ALTER EXTENSION UPDATE replaces it with the PL/pgSQL one of
/// `sql/schema/rights.sql`. It does nothing: what 0.3.0 gave is not recorded in `jq_schema_usage`
/// and stays (guide, "Upgrading"), and refusing with 55000 as the other functions do would stop
/// `DROP EXTENSION` of any database not yet updated (guide, "Uninstall").
#[pg_guard]
#[no_mangle]
pub extern "C-unwind" fn jq_extension_dropped(_fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    pg_sys::Datum::from(0)
}

/// The version-1 calling convention of `jq_extension_dropped`, which PostgreSQL asks for before it
/// calls a C function.
#[no_mangle]
pub extern "C" fn pg_finfo_jq_extension_dropped() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
}
