//! The background reaper, registered only when the library is preloaded.
//!
//! A launcher, connected to no database, starts one reaper per database of
//! `pg_jobqueue.reaper_databases` that exists, as the role of `pg_jobqueue.reaper_role`. A database
//! (or role) that does not exist is logged once and looked for again every minute, so a typo costs
//! one log line rather than a worker that fails to connect every second. Each reaper pass calls the
//! same code as `jq_reap()` (and, less often, `jq_prune()`) in its own short transaction.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags};
use pgrx::prelude::*;
use pgrx::spi;

use crate::api::{reap, retention};
use crate::db::{self, begin_worker_transaction as begin_transaction, commit_worker_transaction as commit_transaction};
use crate::{guc, rights};

const USE_EXTENSION_SCHEMA: &str = include_str!("../sql/queries/use_extension_schema.sql");
const MAY_EXECUTE: &str = include_str!("../sql/queries/reaper_may_execute.sql");
const ONE_REAPER: &str = include_str!("../sql/queries/reaper_lock.sql");

/// How often the launcher looks again for a database or role that did not exist.
const LOOK_AGAIN: Duration = Duration::from_secs(60);

/// Registers the launcher. Called from `_PG_init` while preloading, and never by pg_upgrade, whose
/// server must not change data behind its back.
pub fn register_workers() {
    // SAFETY: a flag PostgreSQL sets for the life of a pg_upgrade server.
    if unsafe { pg_sys::IsBinaryUpgrade } || guc::reaper_databases().is_empty() {
        return;
    }
    BackgroundWorkerBuilder::new("pg_jobqueue launcher")
        .set_type("pg_jobqueue launcher")
        .set_function("jq_launcher_main")
        .set_library("pg_jobqueue")
        .enable_spi_access()
        // A standby cannot reap: the workers start once recovery is over (after a promotion).
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// The launcher: starts a reaper for each listed database once it (and the configured role) exist.
/// Reapers that crash or are terminated are restarted by the postmaster, not by the launcher.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn jq_launcher_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // No database: the launcher reads only the shared catalogs (pg_database, pg_authid).
    BackgroundWorker::connect_worker_to_spi(None, None);
    let role = guc::reaper_role();
    // Per database not yet started: when to look next, and whether its absence was logged.
    let mut waiting: HashMap<String, (Instant, bool)> =
        guc::reaper_databases().into_iter().map(|db| (db, (Instant::now(), false))).collect();
    loop {
        waiting.retain(|database, (next_look, warned)| {
            if Instant::now() < *next_look {
                return true;
            }
            match missing(database, role.as_deref()) {
                None => {
                    start_reaper(database);
                    false
                }
                Some(what) => {
                    if !*warned {
                        warning!("pg_jobqueue launcher: {what}; no reaper for database {database} until it exists (looked for again every minute)");
                        *warned = true;
                    }
                    *next_look = Instant::now() + LOOK_AGAIN;
                    true
                }
            }
        });
        if !BackgroundWorker::wait_latch(Some(Duration::from_secs(1))) {
            // SIGTERM: come back as after a crash; while the server shuts down it does not.
            // SAFETY: exits this worker process; nothing of it is left to clean up.
            unsafe { pg_sys::proc_exit(1) };
        }
    }
}

/// What is missing for a reaper of `database`, if anything.
fn missing(database: &str, role: Option<&str>) -> Option<String> {
    begin_transaction();
    // SAFETY: each tuple comes from a scan of pg_database, so it holds a pg_database row.
    let database_missing = !shared_catalog_names(pg_sys::DatabaseRelationId, |tuple| unsafe {
        (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tuple)).datname
    })
    .iter()
    .any(|name| name == database);
    let role_missing = role.is_some_and(|role| {
        // SAFETY: each tuple comes from a scan of pg_authid, so it holds a pg_authid row.
        !shared_catalog_names(pg_sys::AuthIdRelationId, |tuple| unsafe {
            (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_authid>(tuple)).rolname
        })
        .iter()
        .any(|name| name == role)
    });
    commit_transaction();
    if database_missing {
        Some(format!("database \"{database}\" does not exist"))
    } else if role_missing {
        Some(format!("pg_jobqueue.reaper_role \"{}\" does not exist", role.unwrap_or_default()))
    } else {
        None
    }
}

/// The names in a shared catalog (pg_database, pg_authid), read with a plain heap scan: the
/// launcher is connected to no database, so it has no relcache for indexes or syscaches to use.
fn shared_catalog_names(catalog: pg_sys::Oid, name_of: impl Fn(pg_sys::HeapTuple) -> pg_sys::NameData) -> Vec<String> {
    let mut names = Vec::new();
    // SAFETY: a plain heap scan of a shared catalog inside the caller's transaction, opened and
    // closed here with the same lock; names are NUL-terminated NameData.
    unsafe {
        let relation = pg_sys::table_open(catalog, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let scan = pg_sys::table_beginscan_catalog(relation, 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            let name = name_of(tuple);
            names.push(std::ffi::CStr::from_ptr(name.data.as_ptr()).to_string_lossy().into_owned());
        }
        pg_sys::table_endscan(scan);
        pg_sys::table_close(relation, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    }
    names
}

fn start_reaper(database: &str) {
    let started = BackgroundWorkerBuilder::new(&format!("pg_jobqueue reaper for database {database}"))
        .set_type("pg_jobqueue reaper")
        .set_function("jq_reaper_main")
        .set_library("pg_jobqueue")
        .set_extra(database)
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load_dynamic();
    if started.is_err() {
        warning!("pg_jobqueue launcher: no free background worker slot for the reaper of database {database} (max_worker_processes)");
    }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn jq_reaper_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let database = BackgroundWorker::get_extra().to_owned();
    let role = guc::reaper_role();
    BackgroundWorker::connect_worker_to_spi(Some(&database), role.as_deref());
    // A launcher restarted after a crash starts reapers again; the one already running keeps the
    // database, and a second one leaves for good (exit 0 unregisters a dynamic worker).
    if !take_database() {
        // SAFETY: exits this worker process between transactions.
        unsafe { pg_sys::proc_exit(0) };
    }
    log!("pg_jobqueue reaper started for database {database}");

    let mut last_prune = Instant::now();
    let mut refused: HashMap<&'static str, Instant> = HashMap::new();
    while BackgroundWorker::wait_latch(Some(interval())) {
        if BackgroundWorker::sighup_received() {
            // SAFETY: rereads the configuration between transactions, as PostgreSQL's own workers do.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        if !guc::REAPER_ENABLED.get() {
            continue;
        }
        let reaped = run_pass("reap", Some(("jq_reap", &mut refused)), || {
            reap::reap_expired(guc::REAPER_MAX_JOBS.get(), None, db::clock::now()).map(Some)
        });
        if let Some(Some(reaped)) = reaped.filter(|n| n.is_some_and(|n| n > 0)) {
            log!("pg_jobqueue reaper: reaped {reaped} expired lease(s) in database {database}");
        }
        let prune_every = Duration::from_secs(guc::PRUNE_INTERVAL_S.get() as u64);
        if !prune_every.is_zero() && last_prune.elapsed() >= prune_every {
            last_prune = Instant::now();
            let pruned = run_pass("prune", Some(("jq_prune", &mut refused)), || {
                retention::prune(guc::REAPER_MAX_JOBS.get()).map(Some)
            });
            if let Some(Some(pruned)) = pruned.filter(|n| n.is_some_and(|n| n > 0)) {
                log!("pg_jobqueue reaper: pruned {pruned} finished job(s) in database {database}");
            }
        }
    }
    // SIGTERM. Exit as a crash would, so that after pg_terminate_backend() the postmaster starts the
    // worker again; while the server shuts down it does not.
    // SAFETY: exits this worker process between transactions.
    unsafe { pg_sys::proc_exit(1) };
}

fn interval() -> Duration {
    Duration::from_millis(guc::REAPER_INTERVAL_MS.get() as u64)
}

/// Takes this database's reaper lock (a session-level advisory lock), or says another reaper has it.
fn take_database() -> bool {
    begin_transaction();
    let taken = db::rows_planned_per_call::<(bool,)>(ONE_REAPER, &[]).expect("pg_try_advisory_lock runs");
    commit_transaction();
    taken.first().is_some_and(|(taken,)| *taken)
}

/// Why a pass did not run to its end.
enum Failure {
    /// The role of `pg_jobqueue.reaper_role` may not use the extension's schema, or not EXECUTE the
    /// function the pass stands for.
    Refused,
    Error(String),
}

/// The function a pass stands for, with the passes refused so far (and when they were last tried).
type Gate<'a> = Option<(&'static str, &'a mut HashMap<&'static str, Instant>)>;

/// Runs one pass in its own transaction, with the path pinned and the extension owner's rights, as
/// the SQL function it stands for would run. A database without the extension is skipped. A role
/// set in `pg_jobqueue.reaper_role` must be allowed to EXECUTE that function: while it is not, the
/// pass is logged once and tried again every minute. An error aborts the transaction and is logged
/// as a warning; the worker goes on with the next pass rather than crash-looping.
fn run_pass<T>(what: &str, gate: Gate, pass: impl FnOnce() -> spi::Result<Option<T>>) -> Option<Option<T>> {
    if let Some((function, refused)) = &gate {
        if refused.get(function).is_some_and(|at| at.elapsed() < LOOK_AGAIN) {
            return None;
        }
    }
    begin_transaction();
    let outcome: Result<Option<Option<T>>, Failure> = PgTryBuilder::new(AssertUnwindSafe(|| {
        let installed = db::rows_planned_per_call::<()>(USE_EXTENSION_SCHEMA, &[]).map(|rows| !rows.is_empty());
        match installed {
            Ok(false) => Ok(None),
            Ok(true) => {
                if let Some((function, _)) = &gate {
                    let may = db::rows_planned_per_call::<(Option<bool>,)>(MAY_EXECUTE, &[(*function).into()]);
                    if !may.is_ok_and(|rows| rows.first().is_some_and(|(may,)| *may == Some(true))) {
                        return Err(Failure::Refused);
                    }
                }
                // SQL definitions older than the library: skipped like a database without the
                // extension until ALTER EXTENSION UPDATE (its functions say so to their callers).
                if !rights::enforced() {
                    return Ok(None);
                }
                rights::as_owner(pass).map(Some).map_err(|e| Failure::Error(e.to_string()))
            }
            Err(e) => Err(Failure::Error(e.to_string())),
        }
    }))
    .catch_others(|error| Err(Failure::Error(db::describe(error))))
    .execute();
    match outcome {
        Ok(done) => {
            commit_transaction();
            if let Some((function, refused)) = gate {
                refused.remove(function);
            }
            done
        }
        Err(failure) => {
            db::abort_worker_transaction();
            match (failure, gate) {
                (Failure::Refused, Some((function, refused))) => {
                    if refused.insert(function, Instant::now()).is_none() {
                        warning!("pg_jobqueue reaper: the role of pg_jobqueue.reaper_role may not use the extension's schema or EXECUTE {function}() here; GRANT USAGE on the schema and EXECUTE ON FUNCTION {function} to it (tried again every minute)");
                    }
                }
                (Failure::Refused, None) => unreachable!("only a gated pass is refused"),
                (Failure::Error(message), _) => {
                    warning!("pg_jobqueue reaper: the {what} pass failed and will be retried: {message}")
                }
            }
            None
        }
    }
}
