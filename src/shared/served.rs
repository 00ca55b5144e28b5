//! The databases the background worker maintains (guide, "Maintenance"), in shared memory: one
//! slot per database a worker serves, with the worker's pid and when each of its passes last ran;
//! the databases a backend is dropping, renaming or copying right now (holds), which no worker may
//! connect to meanwhile; and the databases whose extension was just created (wanted), for the
//! launcher to serve within a second.
//!
//! Only the launcher gives a slot to a database and takes it back; a worker writes only its own
//! slot; a backend takes a hold of its own and gives it back. So every field is an atomic, and no
//! lock is needed: a reader may see a slot between two of its writes, which at worst shows a pass
//! time a moment old.

use std::sync::atomic::{AtomicI32, AtomicI64, AtomicPtr, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use pgrx::pg_sys;

/// The most databases served at once: the bound of `pg_jobqueue.max_workers`.
pub const SLOTS: usize = crate::guc::MOST_WORKERS;
/// The most databases being dropped, renamed or copied at once (each by one backend).
const HOLDS: usize = 64;
/// Room for the databases whose extension was created since the launcher last looked.
const WANTED: usize = 64;

/// The passes a worker (or a claim, inline) runs, each with the time it last ran.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Pass {
    /// Expired leases and expired jobs (`jq_reap`).
    Reap,
    /// Retention (`jq_prune`).
    Prune,
    /// The day partitions of history, made at each prune.
    Partitions,
    /// The schedules' ticks, made at each reap.
    Ticks,
}

impl Pass {
    pub const ALL: [Pass; PASSES] = [Pass::Reap, Pass::Prune, Pass::Partitions, Pass::Ticks];

    pub fn label(self) -> &'static str {
        match self {
            Pass::Reap => "reap",
            Pass::Prune => "prune",
            Pass::Partitions => "partitions",
            Pass::Ticks => "ticks",
        }
    }
}

const PASSES: usize = 4;

/// Where a slot's worker is.
pub mod state {
    /// The launcher registered the worker; it has not connected yet.
    pub const STARTING: u32 = 1;
    /// The worker serves the database.
    pub const SERVING: u32 = 2;
    /// The worker found no extension in the database and left.
    pub const ABSENT: u32 = 3;
}

#[repr(C)]
struct Slot {
    /// The database's oid; 0: a free slot.
    database: AtomicU32,
    state: AtomicU32,
    /// The worker's pid while it runs, else 0.
    pid: AtomicI32,
    /// When each pass last ended (TimestampTz, microseconds since 2000); 0: never.
    passes: [AtomicI64; PASSES],
    /// When a hold of the database was last given back (TimestampTz); 0: never.
    released_at: AtomicI64,
}

#[repr(C)]
struct Hold {
    /// The holding backend's pid; 0: a free hold.
    pid: AtomicI32,
    database: AtomicU32,
}

#[repr(C)]
struct Table {
    /// The launcher's latch, set when a database is wanted or a hold is given back.
    launcher: AtomicPtr<pg_sys::Latch>,
    slots: [Slot; SLOTS],
    holds: [Hold; HOLDS],
    /// Databases whose extension was created; 0: free.
    wanted: [AtomicU32; WANTED],
    /// Set when `wanted` was full: the launcher then looks at every database again.
    overflow: AtomicU32,
}

/// Set when the process attaches shared memory; null unless the library was preloaded.
static mut TABLE: *mut Table = std::ptr::null_mut();

pub fn shared_size() -> usize {
    std::mem::size_of::<Table>()
}

/// Takes this part of shared memory (`shared_size()` bytes at `base`), zeroed when `new`. Only
/// from the shared-memory startup hook.
pub unsafe fn attach(base: *mut u8, new: bool) {
    // SAFETY: `base` holds `shared_size()` bytes; zero bytes are free slots, holds and wants, and
    // no launcher. Each process sets the pointer once, before any SQL function runs.
    unsafe {
        if new {
            std::ptr::write_bytes(base, 0, shared_size());
        }
        TABLE = base.cast();
    }
}

fn table() -> Option<&'static Table> {
    // SAFETY: set once at startup; the part lives as long as the server.
    unsafe { TABLE.as_ref() }
}

/// What a backend sees of its database's maintenance.
pub struct Served {
    /// The worker's pid, if one serves the database now.
    pub worker: Option<i32>,
    /// When each pass last ran here, by the worker (TimestampTz), in `Pass::ALL` order.
    pub passes: [Option<i64>; PASSES],
}

/// The slot of `database`, if it has one.
fn slot_of(table: &Table, database: u32) -> Option<&Slot> {
    table.slots.iter().find(|slot| slot.database.load(Ordering::SeqCst) == database)
}

/// What shared memory knows of this backend's database; None without preload.
pub fn this_database() -> Option<Served> {
    let table = table()?;
    // SAFETY: a plain read of this backend's database.
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let Some(slot) = slot_of(table, database) else {
        return Some(Served { worker: None, passes: [None; PASSES] });
    };
    let serving = slot.state.load(Ordering::SeqCst) == state::SERVING;
    let pid = slot.pid.load(Ordering::SeqCst);
    Some(Served {
        worker: (serving && pid != 0).then_some(pid),
        passes: slot.passes.each_ref().map(|at| Some(at.load(Ordering::SeqCst)).filter(|at| *at != 0)),
    })
}

/// Whether a worker serves this backend's database now.
pub fn worker_serves_this_database() -> bool {
    this_database().is_some_and(|served| served.worker.is_some())
}

// The launcher's side.

/// Makes the calling process the launcher that `want` and `release` wake.
pub fn launcher_started() {
    if let Some(table) = table() {
        // SAFETY: MyLatch is this process's latch, in shared memory for the life of the process.
        table.launcher.store(unsafe { pg_sys::MyLatch }, Ordering::SeqCst);
    }
}

/// Gives a free slot to `database`, keeping its pass times if it had a slot; None if all are
/// taken. Only the launcher calls it.
pub fn assign(database: u32) -> Option<usize> {
    let table = table()?;
    let index = table.slots.iter().position(|slot| slot.database.load(Ordering::SeqCst) == database).or_else(|| {
        let free = table.slots.iter().position(|slot| slot.database.load(Ordering::SeqCst) == 0)?;
        let slot = &table.slots[free];
        slot.passes.iter().for_each(|at| at.store(0, Ordering::SeqCst));
        slot.released_at.store(0, Ordering::SeqCst);
        slot.database.store(database, Ordering::SeqCst);
        Some(free)
    })?;
    let slot = &table.slots[index];
    slot.pid.store(0, Ordering::SeqCst);
    slot.state.store(state::STARTING, Ordering::SeqCst);
    Some(index)
}

/// Takes the slot back from its database. Only the launcher calls it.
pub fn free(index: usize) {
    if let Some(table) = table() {
        let slot = &table.slots[index];
        slot.state.store(0, Ordering::SeqCst);
        slot.pid.store(0, Ordering::SeqCst);
        slot.database.store(0, Ordering::SeqCst);
    }
}

/// The slot's database and state.
pub fn slot(index: usize) -> Option<(u32, u32)> {
    let slot = &table()?.slots[index];
    Some((slot.database.load(Ordering::SeqCst), slot.state.load(Ordering::SeqCst)))
}

/// Whether the worker of slot `index` runs: it set its pid and its process exists.
pub fn worker_alive(index: usize) -> bool {
    let Some(slot) = table().map(|table| &table.slots[index]) else { return false };
    let pid = slot.pid.load(Ordering::SeqCst);
    // SAFETY: kill with signal 0 only asks whether the process exists.
    pid != 0 && unsafe { libc::kill(pid, 0) } == 0
}

/// The slots in use, as (index, database, state).
pub fn slots_in_use() -> Vec<(usize, u32, u32)> {
    let Some(table) = table() else { return Vec::new() };
    (0..SLOTS)
        .filter_map(|index| {
            let slot = &table.slots[index];
            let database = slot.database.load(Ordering::SeqCst);
            (database != 0).then(|| (index, database, slot.state.load(Ordering::SeqCst)))
        })
        .collect()
}

/// The databases wanted since the last call, and whether some were lost for lack of room (then
/// every database not served is to be looked at again).
pub fn take_wanted() -> (Vec<u32>, bool) {
    let Some(table) = table() else { return (Vec::new(), false) };
    let wanted = table.wanted.iter().map(|entry| entry.swap(0, Ordering::SeqCst)).filter(|db| *db != 0).collect();
    (wanted, table.overflow.swap(0, Ordering::SeqCst) != 0)
}

/// Whether a backend holds `database` now (dropping, renaming or copying it). A hold whose
/// backend is gone is given back here.
pub fn held(database: u32) -> bool {
    let Some(table) = table() else { return false };
    table.holds.iter().any(|hold| {
        let pid = hold.pid.load(Ordering::SeqCst);
        if pid == 0 || hold.database.load(Ordering::SeqCst) != database {
            return false;
        }
        // SAFETY: kill with signal 0 only asks whether the process exists.
        if unsafe { libc::kill(pid, 0) } != 0 {
            let _ = hold.pid.compare_exchange(pid, 0, Ordering::SeqCst, Ordering::SeqCst);
            return false;
        }
        true
    })
}

// The worker's side.

/// The database of slot `index`, and marks its worker as this process. Only the slot's worker.
pub fn worker_started(index: usize) -> Option<u32> {
    let slot = &table()?.slots.get(index)?;
    // SAFETY: a plain read of this process's pid.
    slot.pid.store(unsafe { pg_sys::MyProcPid }, Ordering::SeqCst);
    Some(slot.database.load(Ordering::SeqCst)).filter(|database| *database != 0)
}

/// The worker of slot `index` serves its database.
pub fn worker_serving(index: usize) {
    if let Some(slot) = table().and_then(|table| table.slots.get(index)) {
        slot.state.store(state::SERVING, Ordering::SeqCst);
    }
}

/// The worker of slot `index` leaves, and says whether it found the extension absent.
pub fn worker_leaving(index: usize, absent: bool) {
    if let Some(table) = table() {
        let slot = &table.slots[index];
        slot.pid.store(0, Ordering::SeqCst);
        if absent {
            slot.state.store(state::ABSENT, Ordering::SeqCst);
        }
        wake_launcher(table);
    }
}

/// Notes that `pass` ended at `at` in the database of slot `index`.
pub fn pass_ran(index: usize, pass: Pass, at: i64) {
    if let Some(slot) = table().and_then(|table| table.slots.get(index)) {
        slot.passes[pass as usize].store(at, Ordering::SeqCst);
    }
}

// A backend's side.

/// Tells the launcher that the extension was created in this backend's database (at commit).
pub fn want_this_database() {
    let Some(table) = table() else { return };
    // SAFETY: a plain read of this backend's database.
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let placed = table.wanted.iter().any(|entry| {
        entry.load(Ordering::SeqCst) == database
            || entry.compare_exchange(0, database, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    });
    if !placed {
        table.overflow.store(1, Ordering::SeqCst);
    }
    wake_launcher(table);
}

/// Wakes the worker that serves this backend's database, if one does, for a pass now rather than
/// at its next interval: a call left it held jobs to release or cancel (guide, "Workflows").
pub fn wake_worker() {
    let Some(table) = table() else { return };
    // SAFETY: a plain read of this backend's database.
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let Some(pid) = slot_of(table, database).map(|slot| slot.pid.load(Ordering::SeqCst)).filter(|pid| *pid != 0) else {
        return;
    };
    // SAFETY: BackendPidGetProc takes ProcArrayLock itself and returns the PGPROC of a live process
    // or null; a PGPROC and its latch live in shared memory as long as the server, so setting the
    // latch of a worker that exits meanwhile is harmless.
    unsafe {
        let process = pg_sys::BackendPidGetProc(pid);
        if !process.is_null() {
            pg_sys::SetLatch(&raw mut (*process).procLatch);
        }
    }
}

fn wake_launcher(table: &Table) {
    let latch = table.launcher.load(Ordering::SeqCst);
    if !latch.is_null() {
        // SAFETY: the launcher's latch lives in shared memory as long as the server; setting the
        // latch of a process that has since exited is harmless (PGPROC latches are never freed).
        unsafe { pg_sys::SetLatch(latch) };
    }
}

/// Holds `database` for this backend: no worker connects to it until `release`, and the one
/// that serves it now is asked to leave and waited for, up to `patience`. Returns whether a hold
/// was taken (false without preload).
pub fn hold(database: u32, patience: Duration) -> bool {
    let Some(table) = table() else { return false };
    // SAFETY: a plain read of this process's pid.
    let me = unsafe { pg_sys::MyProcPid };
    let started = Instant::now();
    let hold = loop {
        if let Some(hold) =
            table.holds.iter().find(|hold| hold.pid.compare_exchange(0, me, Ordering::SeqCst, Ordering::SeqCst).is_ok())
        {
            break hold;
        }
        // Every hold taken: as many backends drop or rename databases at once. Wait for one.
        if started.elapsed() > patience {
            return false;
        }
        sleep_a_little();
    };
    let_a_pass_run(table, database, started, patience.min(PASS_BETWEEN_HOLDS));
    hold.database.store(database, Ordering::SeqCst);
    while let Some(pid) = slot_of(table, database).map(|slot| slot.pid.load(Ordering::SeqCst)).filter(|pid| *pid != 0) {
        if started.elapsed() > patience {
            break;
        }
        // SAFETY: asks the worker to leave; it ends its pass (each is short) and exits.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        sleep_a_little();
    }
    true
}

/// How long a hold waits for the worker of a database held just before to run a pass.
const PASS_BETWEEN_HOLDS: Duration = Duration::from_secs(2);

/// What one hold may do to a database's maintenance is bounded (guide, "Maintenance"): a hold of a
/// database whose last hold was given back after its worker's last reap pass first waits, up to
/// `most` since `started`, for the worker to come back and run one. Statements that fail one after
/// the other (another session is connected) slow the database's maintenance to a pass between
/// two of them, and never stop it. Not while the worker is turned off (`reaper_enabled`), whose
/// passes would never come.
fn let_a_pass_run(table: &Table, database: u32, started: Instant, most: Duration) {
    let Some(slot) = slot_of(table, database) else { return };
    let released = slot.released_at.load(Ordering::SeqCst);
    if released == 0 || !crate::guc::REAPER_ENABLED.get() {
        return;
    }
    while slot.passes[Pass::Reap as usize].load(Ordering::SeqCst) < released && started.elapsed() < most {
        sleep_a_little();
    }
}

/// Gives back this backend's holds, and tells the launcher.
pub fn release() {
    let Some(table) = table() else { return };
    // SAFETY: a plain read of this process's pid, and of the clock.
    let (me, now) = unsafe { (pg_sys::MyProcPid, pg_sys::GetCurrentTimestamp()) };
    for hold in &table.holds {
        if hold.pid.load(Ordering::SeqCst) == me {
            if let Some(slot) = slot_of(table, hold.database.load(Ordering::SeqCst)) {
                slot.released_at.store(now, Ordering::SeqCst);
            }
            hold.database.store(0, Ordering::SeqCst);
            hold.pid.store(0, Ordering::SeqCst);
        }
    }
    wake_launcher(table);
}

/// Waits 10 ms on this backend's latch. Interrupts are taken in by the statement that follows:
/// the wait is bounded, and an error raised here would not be the statement's own.
fn sleep_a_little() {
    // SAFETY: waits on this process's own latch with a timeout, then resets it.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            10,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
}
