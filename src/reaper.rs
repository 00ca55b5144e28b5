//! The background reaper: one worker per database in `pg_jobqueue.reaper_databases`, registered
//! only when the library is preloaded. Each pass calls the same code as `jq_reap()` (and, less
//! often, `jq_prune()`) in its own short transaction.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::spi;

use crate::{guc, reap, retention};

const USE_EXTENSION_SCHEMA: &str = include_str!("../sql/queries/use_extension_schema.sql");

/// True in every process of a server that preloaded the library (set in the postmaster, inherited).
static PRELOADED: AtomicBool = AtomicBool::new(false);

/// Registers the workers. Called from `_PG_init` while preloading, and never by pg_upgrade, whose
/// server must not change data behind its back.
pub fn register_workers() {
    PRELOADED.store(true, Ordering::Relaxed);
    if unsafe { pg_sys::IsBinaryUpgrade } {
        return;
    }
    for database in guc::reaper_databases() {
        BackgroundWorkerBuilder::new(&format!("pg_jobqueue reaper for database {database}"))
            .set_type("pg_jobqueue reaper")
            .set_function("jq_reaper_main")
            .set_library("pg_jobqueue")
            .set_extra(&database)
            .enable_spi_access()
            // A standby cannot reap: the worker starts once recovery is over (after a promotion).
            .set_start_time(BgWorkerStartTime::RecoveryFinished)
            .set_restart_time(Some(Duration::from_secs(1)))
            .load();
    }
}

/// Whether a background reaper is reaping this backend's database right now, as far as this backend
/// can know: the library was preloaded, the reaper is on and the database is on its list.
pub fn serves_this_database() -> bool {
    PRELOADED.load(Ordering::Relaxed) && guc::REAPER_ENABLED.get() && DATABASE_LISTED.with(|listed| *listed)
}

thread_local! {
    /// Whether this backend's database is in pg_jobqueue.reaper_databases; both are fixed for the
    /// life of a backend.
    static DATABASE_LISTED: bool = {
        let name = unsafe { std::ffi::CStr::from_ptr(pg_sys::get_database_name(pg_sys::MyDatabaseId)) };
        let name = name.to_string_lossy();
        guc::reaper_databases().iter().any(|db| *db == name)
    };
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn jq_reaper_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let database = BackgroundWorker::get_extra().to_owned();
    BackgroundWorker::connect_worker_to_spi(Some(&database), None);
    log!("pg_jobqueue reaper started for database {database}");

    let mut last_prune = Instant::now();
    while BackgroundWorker::wait_latch(Some(interval())) {
        if BackgroundWorker::sighup_received() {
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        if !guc::REAPER_ENABLED.get() {
            continue;
        }
        if let Some(reaped) = run_pass("reap", || reap::reap_expired(guc::REAPER_MAX_JOBS.get(), None)) {
            if reaped > 0 {
                log!("pg_jobqueue reaper: reaped {reaped} expired lease(s) in database {database}");
            }
        }
        let prune_every = Duration::from_secs(guc::PRUNE_INTERVAL_S.get() as u64);
        if !prune_every.is_zero() && last_prune.elapsed() >= prune_every {
            last_prune = Instant::now();
            if let Some(pruned) = run_pass("prune", || retention::prune(guc::REAPER_MAX_JOBS.get())) {
                if pruned > 0 {
                    log!("pg_jobqueue reaper: pruned {pruned} finished job(s) in database {database}");
                }
            }
        }
    }
    // SIGTERM. Exit as a crash would, so that after pg_terminate_backend() the postmaster starts the
    // worker again; while the server shuts down it does not.
    unsafe { pg_sys::proc_exit(1) };
}

fn interval() -> Duration {
    Duration::from_millis(guc::REAPER_INTERVAL_MS.get() as u64)
}

/// Runs one pass in its own transaction. A database without the extension is skipped. An error
/// aborts the transaction and is logged as a warning; the worker goes on with the next pass rather
/// than crash-looping.
fn run_pass(what: &str, pass: impl FnOnce() -> spi::Result<i32>) -> Option<i32> {
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    let outcome: Result<Option<i32>, String> = PgTryBuilder::new(AssertUnwindSafe(|| {
        let installed = Spi::connect_mut(|client| client.update(USE_EXTENSION_SCHEMA, None, &[]).map(|t| !t.is_empty()));
        match installed {
            Ok(false) => Ok(None),
            Ok(true) => pass().map(Some).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }))
    .catch_others(|error| Err(describe(error)))
    .execute();
    match outcome {
        Ok(done) => {
            unsafe {
                pg_sys::PopActiveSnapshot();
                pg_sys::CommitTransactionCommand();
            }
            done
        }
        Err(message) => {
            unsafe { pg_sys::AbortCurrentTransaction() };
            warning!("pg_jobqueue reaper: the {what} pass failed and will be retried: {message}");
            None
        }
    }
}

fn describe(error: CaughtError) -> String {
    match error {
        CaughtError::PostgresError(report) | CaughtError::ErrorReport(report) | CaughtError::RustPanic { ereport: report, .. } => {
            report.message().to_owned()
        }
    }
}
