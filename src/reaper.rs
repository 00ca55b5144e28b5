//! The background worker, registered only when the library is preloaded (guide, "Maintenance").
//!
//! A launcher, connected to no database, reads pg_database every second and serves every database
//! that has the extension (of those `pg_jobqueue.reaper_databases` allows: '*', the default, is
//! every one), with one worker each, at most `pg_jobqueue.max_workers` at once. It cannot see into
//! a database, so it starts a worker for each database it has not seen yet: the worker connects,
//! finds the extension or not, and leaves at once if not. Later a `CREATE EXTENSION pg_jobqueue`
//! tells the launcher at its commit (`shared::served`, through the utility hook), so a database is
//! served within a second, with no restart; a worker whose extension was dropped leaves.
//!
//! A statement that needs a database to itself (`DROP DATABASE`, a rename, a copy as a template)
//! holds it: its worker is asked to leave, and none is started for it until the statement ends
//! (`shared::utility`). So the worker never makes such a statement fail or wait.
//!
//! The launcher starts and restarts the workers (the postmaster does not): one that stops for any
//! reason other than a missing extension is started again a second later. Each worker pass calls
//! the same code as `jq_reap()` (and, less often, `jq_prune()`) in its own short transaction, and
//! notes when it ran for `jq_maintenance`.

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus, BgWorkerStartTime, DynamicBackgroundWorker,
    SignalWakeFlags,
};
use pgrx::prelude::*;
use pgrx::spi;

use crate::api::{maintenance, retention};
use crate::db::{self, begin_worker_transaction as begin_transaction, commit_worker_transaction as commit_transaction};
use crate::shared::served::{self, Pass};
use crate::{guc, rights, version};

const USE_EXTENSION_SCHEMA: &str = include_str!("../sql/queries/use_extension_schema.sql");
const MAY_EXECUTE: &str = include_str!("../sql/queries/reaper_may_execute.sql");

/// How often the launcher looks again for a role that did not exist, and a worker tries again a
/// pass its role may not run.
const LOOK_AGAIN: Duration = Duration::from_secs(60);
/// How long after a worker stopped the launcher starts it again.
const RESTART_AFTER: Duration = Duration::from_secs(1);

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

/// What the launcher knows of a database.
enum Known {
    /// To be looked at (a worker started) from this time on.
    Unknown(Instant),
    /// Its worker found no extension there; looked at again when one is created.
    Absent,
    /// A worker in this slot serves it, or is starting.
    Served(usize, DynamicBackgroundWorker),
    /// A worker a launcher before this one started serves it from this slot (no handle to it
    /// here: it is watched through its slot).
    Adopted(usize),
    /// Its worker left for a statement that needs the database alone (`DROP DATABASE`, a rename,
    /// a move or a copy). The slot stays the database's, and its worker starts again in it as soon
    /// as the statement's transaction ends: a statement that fails costs the database nothing
    /// more than its own duration, never its slot (guide, "Maintenance").
    Reserved(usize),
}

/// A database of pg_database that a worker may connect to.
struct Database {
    oid: u32,
    name: String,
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn jq_launcher_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    // No database: the launcher reads only the shared catalogs (pg_database, pg_authid).
    BackgroundWorker::connect_worker_to_spi(None, None);
    served::launcher_started();
    let listed = guc::reaper_databases();
    let every = listed.iter().any(|name| name == "*");
    let role = guc::reaper_role();
    let mut known: HashMap<u32, Known> = HashMap::new();
    // What was logged once: databases named but missing, the role missing, databases unserved.
    let mut named_missing: HashSet<String> = HashSet::new();
    let mut role_looked: Option<Instant> = None;
    let mut role_oid: Option<pg_sys::Oid> = None;
    let mut unserved: HashSet<u32> = HashSet::new();
    let mut no_slot_logged = false;
    loop {
        if BackgroundWorker::sighup_received() {
            // SAFETY: rereads the configuration between transactions, as PostgreSQL's own workers do.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        let looking_for_role = role.is_some() && role_oid.is_none();
        let role_due = looking_for_role && role_looked.is_none_or(|at| at.elapsed() >= LOOK_AGAIN);
        begin_transaction();
        let databases = connectable_databases();
        if role_due {
            role_oid = role.as_deref().and_then(role_named);
            if role_oid.is_none() && role_looked.is_none() {
                warning!("pg_jobqueue launcher: pg_jobqueue.reaper_role \"{}\" does not exist; no worker starts until it does (looked for again every minute)", role.as_deref().unwrap_or_default());
            }
            role_looked = Some(Instant::now());
        }
        commit_transaction();
        for name in listed.iter().filter(|name| *name != "*") {
            if !databases.iter().any(|db| db.name == *name) && named_missing.insert(name.clone()) {
                warning!("pg_jobqueue launcher: database \"{name}\" does not exist; no worker for database {name} until it exists");
            }
        }
        let eligible: HashMap<u32, String> =
            databases.into_iter().filter(|db| every || listed.contains(&db.name)).map(|db| (db.oid, db.name)).collect();
        named_missing.retain(|name| !eligible.values().any(|db| db == name));
        take_in_news(&mut known, &eligible);
        if role.is_none() || role_oid.is_some() {
            start_workers(&mut known, &eligible, role_oid, &mut unserved, &mut no_slot_logged);
        }
        if !BackgroundWorker::wait_latch(Some(Duration::from_secs(1))) {
            // SIGTERM: come back as after a crash; while the server shuts down it does not. The
            // workers go on meanwhile, and the next launcher finds them in their slots.
            // Nothing of this worker is left to clean up.
            version::exit_process(1);
        }
    }
}

/// Brings what the launcher knows up to date: databases dropped, created, wanted (the extension
/// was created there), and workers that stopped.
fn take_in_news(known: &mut HashMap<u32, Known>, eligible: &HashMap<u32, String>) {
    let now = Instant::now();
    for oid in eligible.keys() {
        known.entry(*oid).or_insert(Known::Unknown(now));
    }
    let (wanted, lost_some) = served::take_wanted();
    for (oid, state) in known.iter_mut() {
        if matches!(state, Known::Absent) && (lost_some || wanted.contains(oid)) {
            *state = Known::Unknown(now);
        }
    }
    for (oid, state) in known.iter_mut() {
        let (slot, stopped) = match state {
            Known::Served(slot, worker) => (*slot, matches!(worker.pid(), Err(BackgroundWorkerStatus::Stopped))),
            Known::Adopted(slot) => (*slot, !served::worker_alive(*slot)),
            _ => continue,
        };
        if !stopped {
            continue;
        }
        let absent = served::slot(slot).is_some_and(|(_, state)| state == served::state::ABSENT);
        if !absent && served::held(*oid) {
            *state = Known::Reserved(slot);
            continue;
        }
        served::free(slot);
        *state = if absent { Known::Absent } else { Known::Unknown(now + RESTART_AFTER) };
    }
    // Databases dropped: forgotten once no worker of theirs runs, and a slot kept for one given back.
    known.retain(|oid, state| {
        let keep = eligible.contains_key(oid) || matches!(state, Known::Served(..) | Known::Adopted(_));
        if let (false, Known::Reserved(slot)) = (keep, &*state) {
            served::free(*slot);
        }
        keep
    });
    // A slot this launcher did not fill: a launcher before this one (which crashed or was
    // terminated) started its worker. A worker still running is adopted, not started twice.
    for (index, database, _) in served::slots_in_use() {
        let mine = known
            .values()
            .any(|state| matches!(state, Known::Served(slot, _) | Known::Adopted(slot) | Known::Reserved(slot) if *slot == index));
        if mine {
            continue;
        }
        if served::worker_alive(index) {
            known.insert(database, Known::Adopted(index));
        } else {
            served::free(index);
            known.insert(database, Known::Unknown(now));
        }
    }
}

/// Starts a worker for each database due to be looked at and not held, up to the bound: first in
/// the slots kept for databases whose hold ended, then in free ones.
fn start_workers(
    known: &mut HashMap<u32, Known>,
    eligible: &HashMap<u32, String>,
    role: Option<pg_sys::Oid>,
    unserved: &mut HashSet<u32>,
    no_slot_logged: &mut bool,
) {
    let now = Instant::now();
    let mut running = known
        .values()
        .filter(|state| matches!(state, Known::Served(..) | Known::Adopted(_) | Known::Reserved(_)))
        .count();
    let released: Vec<(u32, usize)> = known
        .iter()
        .filter_map(|(oid, state)| match state {
            Known::Reserved(slot) if eligible.contains_key(oid) && !served::held(*oid) => Some((*oid, *slot)),
            _ => None,
        })
        .collect();
    for (oid, slot) in released {
        // The slot is still the database's: assign finds it, and marks its worker as starting.
        let slot = served::assign(oid).unwrap_or(slot);
        if let Some(worker) = start_worker(slot, &eligible[&oid], role) {
            known.insert(oid, Known::Served(slot, worker));
        } else {
            served::free(slot);
            running -= 1;
            known.insert(oid, Known::Unknown(now + LOOK_AGAIN));
        }
    }
    let mut due: Vec<u32> = known
        .iter()
        .filter(|(oid, state)| matches!(state, Known::Unknown(from) if *from <= now) && eligible.contains_key(oid))
        .map(|(oid, _)| *oid)
        .collect();
    due.sort_unstable();
    for oid in due {
        if served::held(oid) {
            continue;
        }
        let name = &eligible[&oid];
        let bound = guc::MAX_WORKERS.get() as usize;
        let slot = if running < bound { served::assign(oid) } else { None };
        let Some(slot) = slot else {
            if unserved.insert(oid) {
                log!("pg_jobqueue launcher: database {name} is not served by a worker: pg_jobqueue.max_workers ({bound}) workers serve other databases; claims maintain it meanwhile (see jq_maintenance)");
            }
            continue;
        };
        match start_worker(slot, name, role) {
            Some(worker) => {
                unserved.remove(&oid);
                running += 1;
                known.insert(oid, Known::Served(slot, worker));
            }
            None => {
                served::free(slot);
                if !std::mem::replace(no_slot_logged, true) {
                    warning!("pg_jobqueue launcher: no free background worker slot for the worker of database {name}; raise max_worker_processes (tried again every minute)");
                }
                known.insert(oid, Known::Unknown(now + LOOK_AGAIN));
            }
        }
    }
}

fn start_worker(slot: usize, name: &str, role: Option<pg_sys::Oid>) -> Option<DynamicBackgroundWorker> {
    let role = role.map_or(0, |oid| oid.to_u32());
    BackgroundWorkerBuilder::new(&format!("pg_jobqueue reaper for database {name}"))
        .set_type("pg_jobqueue reaper")
        .set_function("jq_reaper_main")
        .set_library("pg_jobqueue")
        .set_argument(Some(pg_sys::Datum::from(slot)))
        .set_extra(&role.to_string())
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        // The launcher restarts it: the postmaster would restart one whose database was dropped.
        .set_restart_time(None)
        // SAFETY: a plain read of this process's pid; the launcher hears of the worker's start and end.
        .set_notify_pid(unsafe { pg_sys::MyProcPid })
        .load_dynamic()
        .ok()
}

/// The databases of pg_database a worker may serve: those that accept connections and are not
/// templates (a worker connected to a template would make every CREATE DATABASE from it fail).
/// Read with a plain heap scan: the launcher is connected to no database, so it has no relcache
/// for indexes or syscaches to use.
fn connectable_databases() -> Vec<Database> {
    let mut databases = Vec::new();
    // SAFETY: each tuple comes from a scan of pg_database, so it holds a pg_database row.
    scan_shared_catalog(pg_sys::DatabaseRelationId, |tuple| unsafe {
        let row = &*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tuple);
        if row.datallowconn && !row.datistemplate {
            databases.push(Database { oid: row.oid.to_u32(), name: name_of(&row.datname) });
        }
    });
    databases
}

/// The oid of the role named `role`, if it exists.
fn role_named(role: &str) -> Option<pg_sys::Oid> {
    let mut found = None;
    // SAFETY: each tuple comes from a scan of pg_authid, so it holds a pg_authid row.
    scan_shared_catalog(pg_sys::AuthIdRelationId, |tuple| unsafe {
        let row = &*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_authid>(tuple);
        if name_of(&row.rolname) == role {
            found = Some(row.oid);
        }
    });
    found
}

fn name_of(name: &pg_sys::NameData) -> String {
    // SAFETY: a NameData holds a NUL-terminated name.
    unsafe { std::ffi::CStr::from_ptr(name.data.as_ptr()) }.to_string_lossy().into_owned()
}

/// Calls `visit` with each row of a shared catalog, inside the caller's transaction.
fn scan_shared_catalog(catalog: pg_sys::Oid, mut visit: impl FnMut(pg_sys::HeapTuple)) {
    // SAFETY: a plain heap scan of a shared catalog inside the caller's transaction, opened and
    // closed here with the same lock.
    unsafe {
        let relation = pg_sys::table_open(catalog, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        let scan = pg_sys::table_beginscan_catalog(relation, 0, std::ptr::null_mut());
        loop {
            let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
            if tuple.is_null() {
                break;
            }
            visit(tuple);
        }
        pg_sys::table_endscan(scan);
        pg_sys::table_close(relation, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
    }
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn jq_reaper_main(arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let slot = arg.value();
    let Some(database) = served::worker_started(slot) else {
        // Before it connected.
        version::exit_process(0);
    };
    // SAFETY: registers this worker's exit callback once, before it connects; the slot index is
    // its argument.
    unsafe { pg_sys::before_shmem_exit(Some(worker_exits), pg_sys::Datum::from(slot)) };
    // A statement that needs the database alone holds it: not even a connection now (it would
    // count as another session). Marked as started first, so the holder sees this worker or this
    // worker sees the hold.
    if served::held(database) {
        version::exit_process(0);
    }
    let role = BackgroundWorker::get_extra().parse::<u32>().ok().filter(|oid| *oid != 0).map(pg_sys::Oid::from);
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(pg_sys::Oid::from(database)), role);
    let name = database_name();
    let mut last_prune: Option<Instant> = None;
    let mut refused: HashMap<&'static str, Instant> = HashMap::new();
    let mut announced = false;
    loop {
        if BackgroundWorker::sighup_received() {
            // SAFETY: rereads the configuration between transactions, as PostgreSQL's own workers do.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        let outcome = if guc::REAPER_ENABLED.get() {
            passes(&name, slot, &mut last_prune, &mut refused)
        } else {
            // Turned off: no pass, but the worker still leaves a database whose extension is gone.
            run_pass("check", None, || Ok(()))
        };
        match outcome {
            Outcome::Absent => {
                debug1!("pg_jobqueue reaper: the extension is not created in database {name}; the reaper leaves");
                served::worker_leaving(slot, true);
                // Between transactions.
                version::exit_process(0);
            }
            _ if !announced => {
                log!("pg_jobqueue reaper started for database {name}");
                served::worker_serving(slot);
                announced = true;
            }
            _ => {}
        }
        if !BackgroundWorker::wait_latch(Some(interval())) {
            break;
        }
    }
    // SIGTERM (a statement needs the database alone, pg_terminate_backend(), or a shutdown): the
    // launcher starts the worker again once it may.
    // Between transactions.
    version::exit_process(0);
}

/// One round of the worker's passes: a reap (with the ticks), and a prune when one is due (at
/// once when the worker starts, so a new database gets its day partitions within seconds).
fn passes(
    name: &str,
    slot: usize,
    last_prune: &mut Option<Instant>,
    refused: &mut HashMap<&'static str, Instant>,
) -> Outcome<()> {
    let reaped = run_pass("reap", Some(("jq_reap", refused)), || {
        maintenance::reap_pass(guc::REAPER_MAX_JOBS.get(), None, db::clock::now())
    });
    let Outcome::Done(reaped) = reaped else { return reaped.nothing() };
    ran(slot, Pass::Reap);
    if reaped.ticked {
        ran(slot, Pass::Ticks);
    }
    if reaped.leases > 0 {
        log!("pg_jobqueue reaper: reaped {} expired lease(s) in database {name}", reaped.leases);
    }
    let prune_every = Duration::from_secs(guc::PRUNE_INTERVAL_S.get() as u64);
    if prune_every.is_zero() || last_prune.is_some_and(|at| at.elapsed() < prune_every) {
        return Outcome::Done(());
    }
    *last_prune = Some(Instant::now());
    let pruned = run_pass("prune", Some(("jq_prune", refused)), || {
        maintenance::prune_pass(guc::REAPER_MAX_JOBS.get(), retention::By::Maintenance)
    });
    let Outcome::Done(pruned) = pruned else { return pruned.nothing() };
    ran(slot, Pass::Prune);
    ran(slot, Pass::Partitions);
    if pruned > 0 {
        log!("pg_jobqueue reaper: pruned {pruned} finished job(s) in database {name}");
    }
    Outcome::Done(())
}

/// Notes for `jq_maintenance` that `pass` just ran (committed) in the worker's database.
fn ran(slot: usize, pass: Pass) {
    // SAFETY: reads the clock; no transaction needed.
    served::pass_ran(slot, pass, unsafe { pg_sys::GetCurrentTimestamp() });
}

#[pg_guard]
unsafe extern "C-unwind" fn worker_exits(_code: i32, slot: pg_sys::Datum) {
    served::worker_leaving(slot.value(), false);
}

fn interval() -> Duration {
    Duration::from_millis(guc::REAPER_INTERVAL_MS.get() as u64)
}

/// This worker's database's name, for its log lines.
fn database_name() -> String {
    begin_transaction();
    // SAFETY: the name of this worker's own database, which exists while it is connected; copied
    // before the transaction ends.
    let name = unsafe { std::ffi::CStr::from_ptr(pg_sys::get_database_name(pg_sys::MyDatabaseId)) }
        .to_string_lossy()
        .into_owned();
    commit_transaction();
    name
}

/// Holds the extension for the rest of the transaction, if it is installed: a lock that a concurrent
/// `DROP EXTENSION` waits for before it locks anything else (it locks the extension first). Without
/// it, a pass that had locked some of the extension's tables waited for a table the drop had
/// already locked while the drop waited for ours, and the deadlock check cancelled one of the two,
/// often the drop (tests/harness/tests/reaper.rs,
/// `drop_extension_during_the_workers_passes_never_deadlocks`).
/// What committed while we waited is looked up again: a drop leaves no extension (`Absent`), and a
/// drop and a new `CREATE EXTENSION` leave one we do not hold (the next round takes it).
fn hold_extension() -> Option<Outcome<()>> {
    let installed = || {
        // SAFETY: inside the pass's transaction; reads pg_extension by name.
        unsafe { pg_sys::get_extension_oid(c"pg_jobqueue".as_ptr(), true) }
    };
    let extension = installed();
    if extension == pg_sys::InvalidOid {
        return Some(Outcome::Absent);
    }
    // SAFETY: inside the pass's transaction, which releases the lock at its end. The lock takes in
    // the invalidations of whatever committed while it waited, so the lookup below sees them.
    unsafe {
        pg_sys::LockDatabaseObject(
            pg_sys::ExtensionRelationId,
            extension,
            0,
            pg_sys::AccessShareLock as pg_sys::LOCKMODE,
        )
    };
    match installed() {
        now if now == extension => None,
        now if now == pg_sys::InvalidOid => Some(Outcome::Absent),
        _ => Some(Outcome::NotDone),
    }
}

/// How a pass ended.
enum Outcome<T> {
    Done(T),
    /// The extension is not created in the database.
    Absent,
    /// Not run, or not to its end: refused, failed (and logged), or the SQL definitions are older
    /// than the library.
    NotDone,
}

impl<T> Outcome<T> {
    /// The same outcome, for a round of passes that stops here.
    fn nothing<U>(self) -> Outcome<U> {
        match self {
            Outcome::Absent => Outcome::Absent,
            _ => Outcome::NotDone,
        }
    }
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
/// the SQL function it stands for would run. A database without the extension says so. A role
/// set in `pg_jobqueue.reaper_role` must be allowed to EXECUTE that function: while it is not, the
/// pass is logged once and tried again every minute. An error aborts the transaction and is logged
/// as a warning; the worker goes on with the next pass rather than crash-looping.
fn run_pass<T>(what: &str, gate: Gate, pass: impl FnOnce() -> spi::Result<T>) -> Outcome<T> {
    if let Some((function, refused)) = &gate {
        if refused.get(function).is_some_and(|at| at.elapsed() < LOOK_AGAIN) {
            return Outcome::NotDone;
        }
    }
    begin_transaction();
    let outcome: Result<Outcome<T>, Failure> = PgTryBuilder::new(AssertUnwindSafe(|| {
        if let Some(outcome) = hold_extension() {
            return Ok(outcome.nothing());
        }
        let installed = db::rows_planned_per_call::<()>(USE_EXTENSION_SCHEMA, &[]).map(|rows| !rows.is_empty());
        match installed {
            Ok(false) => Ok(Outcome::Absent),
            Ok(true) => {
                if let Some((function, _)) = &gate {
                    let may = db::rows_planned_per_call::<(Option<bool>,)>(MAY_EXECUTE, &[(*function).into()]);
                    if !may.is_ok_and(|rows| rows.first().is_some_and(|(may,)| *may == Some(true))) {
                        return Err(Failure::Refused);
                    }
                }
                // SQL definitions of another version than the library: nothing runs until ALTER
                // EXTENSION UPDATE (its functions say so to their callers).
                if !rights::enforced() || rights::outdated() {
                    return Ok(Outcome::NotDone);
                }
                rights::as_owner(pass).map(Outcome::Done).map_err(|e| Failure::Error(e.to_string()))
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
            Outcome::NotDone
        }
    }
}
