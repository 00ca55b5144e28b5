//! Wake-ups: hints that a queue may have claimable work. The table stays the only truth; a hint
//! that is lost costs latency, never a job, because a waiting claim also re-checks on its own.
//!
//! Two kinds, both sent only after the enqueuing transaction commits:
//! - `NOTIFY "jq_<queue>"` for LISTEN clients, unless the queue's `notify` setting is off;
//! - with the library preloaded, a generation counter and condition variable per queue in shared
//!   memory, for waiting claims. These need no LISTEN, so they work through transaction pooling.
//!
//! NOTIFY is expensive: PostgreSQL serialises the commits of notifying transactions (it holds a
//! database-wide lock from queueing the notification until the commit is flushed), which halved
//! single-job enqueue throughput in the bench. So with the library preloaded, a utility hook counts
//! the sessions that LISTEN on each queue's channel, and an enqueue notifies only while the count
//! is above zero. Without preload there is no count, and every enqueue notifies.
//!
//! Queues map to a fixed number of slots by hash of their database and name (queues of the same
//! name in two databases are two queues); two queues sharing a slot only wake each other
//! spuriously, and a spurious wake costs one empty claim. A LISTEN counts only when its role holds
//! a right on the queue: anyone may LISTEN, but a stranger's LISTEN must not switch on the NOTIFYs
//! (and their cost) for the queue's producers.

use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pgrx::prelude::*;
use pgrx::spi::{self, SpiClient};
use pgrx::IntoDatum;

use crate::{plans, shmem};
use crate::spi_util::first_value;

const NOTIFY_SETTING: &str = include_str!("../sql/queries/queue_notify.sql");
const NOTIFY_SETTING_LEGACY: &str = include_str!("../sql/queries/queue_notify_legacy.sql");

/// Enough that unrelated queues rarely share a slot; 40 kB of shared memory.
const SLOTS: usize = 1024;

/// How long a session trusts what it read of a queue's `notify` setting.
const SETTING_TTL: Duration = Duration::from_secs(1);

#[repr(C)]
struct Slot {
    generation: AtomicU64,
    cv: pg_sys::ConditionVariable,
    /// Sessions that have run LISTEN on the channel of a queue of this slot and not yet UNLISTEN
    /// (counted when the LISTEN runs, so a LISTEN that rolls back counts until the session ends:
    /// too many only costs a NOTIFY nobody hears).
    listeners: AtomicU32,
}

/// The slot array in shared memory; null unless the library was preloaded. Set in the postmaster
/// before any backend is forked, read-only afterwards.
static mut SHARED: *mut Slot = std::ptr::null_mut();
static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;

/// Called from `_PG_init` while the library is preloaded: hooks utility statements to count
/// listeners.
pub fn init_hooks() {
    unsafe {
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(count_listeners);
    }
}

pub fn shared_size() -> usize {
    std::mem::size_of::<Slot>() * SLOTS
}

/// Attaches the slots (see shmem.rs), initialising them on first use.
pub unsafe fn attach() {
    unsafe {
        let (base, new) = shmem::part(c"pg_jobqueue wake-ups", shared_size());
        let slots = base.cast::<Slot>();
        if new {
            for i in 0..SLOTS {
                let slot = slots.add(i);
                (&raw mut (*slot).generation).write(AtomicU64::new(0));
                (&raw mut (*slot).listeners).write(AtomicU32::new(0));
                pg_sys::ConditionVariableInit(&raw mut (*slot).cv);
            }
        }
        SHARED = slots;
    }
}

fn slot_of(queue_name: &str) -> Option<*mut Slot> {
    let shared = unsafe { SHARED };
    if shared.is_null() {
        return None;
    }
    // DefaultHasher::new() has fixed keys: every backend maps a queue to the same slot.
    let mut hasher = DefaultHasher::new();
    (unsafe { pg_sys::MyDatabaseId }.to_u32(), queue_name).hash(&mut hasher);
    Some(unsafe { shared.add((hasher.finish() % SLOTS as u64) as usize) })
}

/// Whether waiting claims are woken through shared memory (the library was preloaded).
pub fn shared() -> bool {
    !unsafe { SHARED }.is_null()
}

thread_local! {
    /// Slots to bump when the current transaction commits. A backend is one thread.
    static PENDING: RefCell<Vec<*mut Slot>> = const { RefCell::new(Vec::new()) };
    /// The jq_ channels this session has counted itself a listener of.
    static LISTENING: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
    /// UNLISTENs of this transaction, applied to the counts when it commits (None: UNLISTEN *).
    static PENDING_UNLISTEN: RefCell<Vec<Option<String>>> = const { RefCell::new(Vec::new()) };
    static EXIT_CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
    /// What this session last read of each queue's `notify` setting, and when.
    static NOTIFY_ON: RefCell<HashMap<String, (bool, Instant)>> = RefCell::new(HashMap::new());
}

/// Records that this transaction enqueued jobs into the queue: LISTEN clients and waiting claimers
/// are told once it commits, and never if it rolls back.
pub fn after_enqueue(client: &mut SpiClient, queue_name: &str) -> spi::Result<()> {
    if may_have_listeners(queue_name) && notify_enabled(client, queue_name)? {
        send_notify(queue_name);
    }
    if let Some(slot) = slot_of(queue_name) {
        register_callback();
        PENDING.with(|pending| {
            let mut pending = pending.borrow_mut();
            if !pending.contains(&slot) {
                pending.push(slot);
            }
        });
    }
    Ok(())
}

/// Without shared memory there is no count, so anyone may be listening.
fn may_have_listeners(queue_name: &str) -> bool {
    slot_of(queue_name).is_none_or(|slot| unsafe { (*slot).listeners.load(Ordering::SeqCst) } > 0)
}

/// NOTIFY is transactional: PostgreSQL delivers it at commit, drops it on rollback (of the
/// transaction or of the subtransaction that sent it), and folds duplicates within a transaction
/// into one, which gives "at most one per queue per transaction" (README, "Wake-ups").
fn send_notify(queue_name: &str) {
    let channel = format!("jq_{queue_name}");
    unsafe {
        pgrx::direct_function_call::<()>(
            pg_sys::pg_notify,
            &[channel.as_str().into_datum(), "".into_datum()],
        );
    }
}

/// The queue's `notify` setting (on for a queue without a row), read at most once a second per
/// session and queue: the setting changes rarely, and enqueue is a hot path.
fn notify_enabled(client: &mut SpiClient, queue_name: &str) -> spi::Result<bool> {
    let cached = NOTIFY_ON.with(|seen| {
        seen.borrow().get(queue_name).filter(|(_, at)| at.elapsed() < SETTING_TTL).map(|(on, _)| *on)
    });
    if let Some(on) = cached {
        return Ok(on);
    }
    let query = if crate::rights::enforced() { NOTIFY_SETTING } else { NOTIFY_SETTING_LEGACY };
    let on = first_value::<bool>(plans::run(client, query, &[queue_name.into()])?)?.unwrap_or(true);
    NOTIFY_ON.with(|seen| seen.borrow_mut().insert(queue_name.to_owned(), (on, Instant::now())));
    Ok(on)
}

fn register_callback() {
    if !CALLBACK_REGISTERED.get() {
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
        CALLBACK_REGISTERED.set(true);
    }
}

/// At commit the new rows are already visible to new snapshots (the commit callback runs after the
/// transaction left the proc array), so a woken claimer finds them.
#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    let bump = match event {
        pg_sys::XactEvent::XACT_EVENT_COMMIT => true,
        // A prepared transaction commits later, maybe in another session; waiters re-check on
        // their own within a second.
        pg_sys::XactEvent::XACT_EVENT_ABORT | pg_sys::XactEvent::XACT_EVENT_PREPARE => false,
        _ => return,
    };
    let slots = PENDING.with(|pending| std::mem::take(&mut *pending.borrow_mut()));
    let unlistens = PENDING_UNLISTEN.with(|pending| std::mem::take(&mut *pending.borrow_mut()));
    if bump {
        for channel in unlistens {
            stop_counting(channel.as_deref());
        }
        for slot in slots {
            unsafe {
                (*slot).generation.fetch_add(1, Ordering::SeqCst);
                pg_sys::ConditionVariableBroadcast(&raw mut (*slot).cv);
            }
        }
    }
}

/// The queue's wake-up generation, to be read before looking for work, so that a commit between
/// the look and the sleep is not missed. None without shared memory.
pub fn generation(queue_name: &str) -> Option<u64> {
    slot_of(queue_name).map(|slot| unsafe { (*slot).generation.load(Ordering::SeqCst) })
}

/// Sleeps up to `timeout`, or until the queue's generation moves past `seen` (shared memory only).
/// Query cancellation and statement_timeout end the sleep at once with their usual error.
pub fn sleep(queue_name: &str, seen: Option<u64>, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    match (slot_of(queue_name), seen) {
        (Some(slot), Some(seen)) => unsafe {
            let cv = &raw mut (*slot).cv;
            pg_sys::ConditionVariablePrepareToSleep(cv);
            while (*slot).generation.load(Ordering::SeqCst) == seen {
                let left = deadline.saturating_duration_since(Instant::now());
                // Returns true on timeout; it checks for interrupts itself.
                if left.is_zero() || pg_sys::ConditionVariableTimedSleep(cv, millis(left), pg_sys::PG_WAIT_EXTENSION) {
                    break;
                }
            }
            pg_sys::ConditionVariableCancelSleep();
        },
        _ => unsafe {
            pg_sys::WaitLatch(
                pg_sys::MyLatch,
                (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
                millis(timeout),
                pg_sys::PG_WAIT_EXTENSION,
            );
            pg_sys::ResetLatch(pg_sys::MyLatch);
        },
    }
    pg_sys::check_for_interrupts!();
}

/// At least 1 ms, so a sub-millisecond remainder does not spin.
fn millis(duration: Duration) -> i64 {
    duration.as_millis().clamp(1, i64::MAX as u128) as i64
}

/// Counts LISTEN and UNLISTEN of `jq_` channels, then runs the statement as usual.
#[pg_guard]
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn count_listeners(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    unsafe {
        let statement = (*pstmt).utilityStmt;
        if pgrx::is_a(statement, pg_sys::NodeTag::T_ListenStmt) {
            let channel = (*statement.cast::<pg_sys::ListenStmt>()).conditionname;
            start_counting(&std::ffi::CStr::from_ptr(channel).to_string_lossy());
        } else if pgrx::is_a(statement, pg_sys::NodeTag::T_UnlistenStmt) {
            let channel = (*statement.cast::<pg_sys::UnlistenStmt>()).conditionname;
            let channel = (!channel.is_null()).then(|| std::ffi::CStr::from_ptr(channel).to_string_lossy().into_owned());
            unlisten_at_commit(channel);
        } else if pgrx::is_a(statement, pg_sys::NodeTag::T_DiscardStmt)
            && (*statement.cast::<pg_sys::DiscardStmt>()).target == pg_sys::DiscardMode::DISCARD_ALL
        {
            // What a pooler sends between clients: it includes UNLISTEN *.
            unlisten_at_commit(None);
        }
        match PREV_PROCESS_UTILITY {
            Some(prev) => prev(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
            None => pg_sys::standard_ProcessUtility(
                pstmt,
                query_string,
                read_only_tree,
                context,
                params,
                query_env,
                dest,
                qc,
            ),
        }
    }
}

/// An UNLISTEN takes effect when its transaction commits, and so does the count.
fn unlisten_at_commit(channel: Option<String>) {
    register_callback();
    PENDING_UNLISTEN.with(|pending| pending.borrow_mut().push(channel));
}

fn start_counting(channel: &str) {
    let Some((queue_name, slot)) = channel.strip_prefix("jq_").and_then(|q| slot_of(q).map(|slot| (q, slot))) else {
        return;
    };
    if !listener_may_see(queue_name) {
        return;
    }
    let new = LISTENING.with(|listening| listening.borrow_mut().insert(channel.to_owned()));
    if new {
        if !EXIT_CALLBACK_REGISTERED.get() {
            unsafe { pg_sys::before_shmem_exit(Some(stop_counting_at_exit), pg_sys::Datum::from(0)) };
            EXIT_CALLBACK_REGISTERED.set(true);
        }
        unsafe { (*slot).listeners.fetch_add(1, Ordering::SeqCst) };
    }
}

/// Whether the listening role holds a right on the queue, in a database with the extension.
fn listener_may_see(queue_name: &str) -> bool {
    let installed = unsafe { pg_sys::get_extension_oid(c"pg_jobqueue".as_ptr(), true) } != pg_sys::InvalidOid;
    installed && crate::rights::may_see(queue_name)
}

/// Stops counting this session as a listener of `channel` (None: of every channel).
fn stop_counting(channel: Option<&str>) {
    let channels: Vec<String> = LISTENING.with(|listening| {
        let mut listening = listening.borrow_mut();
        match channel {
            Some(channel) => listening.take(channel).into_iter().collect(),
            None => listening.drain().collect(),
        }
    });
    for channel in channels {
        if let Some(slot) = channel.strip_prefix("jq_").and_then(slot_of) {
            unsafe { (*slot).listeners.fetch_sub(1, Ordering::SeqCst) };
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn stop_counting_at_exit(_code: i32, _arg: pg_sys::Datum) {
    stop_counting(None);
}
