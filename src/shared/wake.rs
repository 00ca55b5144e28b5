//! Wake-ups: hints that a queue may have claimable work. The table stays the only truth; a hint
//! that is lost costs latency, never a job, because a waiting claim also re-checks on its own.
//!
//! Two kinds, both sent only if the enqueue commits (a rolled-back savepoint or exception block
//! takes its wake-ups with it):
//! - `NOTIFY "jq_<queue>"` for LISTEN clients, as the queue's `notify` setting says: `true`
//!   always, `false` never, NULL (the default) while someone listens, which only a preloaded
//!   library can tell (see `listeners`): without preload, never. A NOTIFY nobody hears is not free
//!   (see `listeners`), so the default installation sends none until a queue asks;
//! - with the library preloaded, a generation counter and condition variable per queue in shared
//!   memory, for waiting claims. These need no LISTEN, so they work through transaction pooling.
//!
//! Queues map to a fixed number of slots by hash; two queues sharing a slot only wake each other
//! spuriously, and a spurious wake costs one empty claim. That is all one role's queue (or one
//! database's) can do to another's through a shared slot: the slot carries no count, no setting
//! and no job, and a waiting claim re-checks the table whatever woke it. The hash is seeded with the
//! server's secret (`queue_key`), so nobody can name a queue to share another's slot on purpose.
//! Slots are not taken or held by queues, so there is nothing to fill.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pgrx::prelude::*;
use pgrx::IntoDatum;

use super::{listeners, queue_key, xact};

/// Enough that unrelated queues rarely share a slot.
const SLOTS: usize = 1024;

/// Without shared memory (not preloaded) a waiting claim can only poll, at most this long apart.
const POLL: Duration = Duration::from_millis(200);

#[repr(C)]
pub(super) struct Slot {
    generation: AtomicU64,
    cv: pg_sys::ConditionVariable,
}

/// The slot array in shared memory; null unless the library was preloaded. Set when the process
/// attaches shared memory, read-only afterwards.
static mut SHARED: *mut Slot = std::ptr::null_mut();

pub fn shared_size() -> usize {
    std::mem::size_of::<Slot>() * SLOTS
}

/// Takes the wake-up part of shared memory (`shared_size()` bytes at `base`), initialising it when
/// `new`. Only from the shared-memory startup hook.
pub unsafe fn attach(base: *mut u8, new: bool) {
    // SAFETY: as the caller promises.
    let slots = unsafe { init_slots(base, new, SLOTS) };
    // SAFETY: written once per process, before any SQL function of it runs.
    unsafe { SHARED = slots };
}

/// The `count` slots at `base`, initialised when `new` (see `attach`).
pub(super) unsafe fn init_slots(base: *mut u8, new: bool, count: usize) -> *mut Slot {
    let slots = base.cast::<Slot>();
    if new {
        for i in 0..count {
            // SAFETY: `base` holds `count` slots; the creating process initialises each one before
            // any other process can attach.
            unsafe {
                let slot = slots.add(i);
                (&raw mut (*slot).generation).write(AtomicU64::new(0));
                pg_sys::ConditionVariableInit(&raw mut (*slot).cv);
            }
        }
    }
    slots
}

/// Moves the slot's generation on and wakes its sleepers.
///
/// # Safety
/// `slot` is one of the initialised slots in shared memory.
pub(super) unsafe fn bump(slot: *mut Slot) {
    // SAFETY: as the caller promises.
    unsafe {
        (*slot).generation.fetch_add(1, Ordering::SeqCst);
        pg_sys::ConditionVariableBroadcast(&raw mut (*slot).cv);
    }
}

/// The slot's generation.
///
/// # Safety
/// `slot` is one of the initialised slots in shared memory.
pub(super) unsafe fn generation_of(slot: *mut Slot) -> u64 {
    // SAFETY: as the caller promises.
    unsafe { (*slot).generation.load(Ordering::SeqCst) }
}

fn slot_of(queue_name: &str) -> Option<*mut Slot> {
    // SAFETY: read-only after startup.
    let shared = unsafe { SHARED };
    if shared.is_null() {
        return None;
    }
    // SAFETY: the index is below SLOTS.
    Some(unsafe { shared.add((queue_key::hash(queue_name) % SLOTS as u64) as usize) })
}

/// Records that this transaction enqueued jobs into the queue: LISTEN clients and waiting claimers
/// are told once it commits, and never if it (or the savepoint around the enqueue) rolls back.
/// `notify` is the queue's setting (None: NULL, or a queue without a row), as the caller's session
/// keeps it (`api::settings`).
pub fn after_enqueue(queue_name: &str, notify: Option<bool>) {
    let notifies = notify.unwrap_or_else(|| crate::guc::preloaded() && listeners::may_have_listeners(queue_name));
    if notifies {
        send_notify(queue_name);
    }
    at_commit(queue_name);
}

/// Wakes the queue's waiting claimers once this transaction commits, and not if it rolls back: it
/// made a job claimable (an enqueue) or freed a concurrency key's slot (a completion).
pub fn at_commit(queue_name: &str) {
    if let Some(slot) = slot_of(queue_name) {
        // At commit the new rows are already visible to new snapshots, so a woken claimer finds them.
        // SAFETY: slots live as long as the server; the condition variable was initialised.
        xact::at_commit(move || unsafe { bump(slot) });
    }
}

/// NOTIFY is transactional: PostgreSQL delivers it at commit, drops it on rollback (of the
/// transaction or of the subtransaction that sent it), and folds duplicates within a transaction
/// into one, which gives "at most one per queue per transaction" (guide, "Wake-ups").
fn send_notify(queue_name: &str) {
    let channel = format!("jq_{queue_name}");
    // SAFETY: pg_notify takes two text arguments, which these datums are.
    unsafe {
        pgrx::direct_function_call::<()>(pg_sys::pg_notify, &[channel.as_str().into_datum(), "".into_datum()]);
    }
}

/// The queue's wake-up generation, to be read before looking for work, so that a commit between
/// the look and the sleep is not missed. None without shared memory.
pub fn generation(queue_name: &str) -> Option<u64> {
    // SAFETY: slots live as long as the server.
    slot_of(queue_name).map(|slot| unsafe { generation_of(slot) })
}

/// The longest a waiting claim may sleep between looks: `recheck`, or, without shared memory to
/// wake it, `POLL` if that is shorter.
pub fn longest_sleep(recheck: Duration) -> Duration {
    if crate::guc::preloaded() {
        recheck
    } else {
        recheck.min(POLL)
    }
}

/// Sleeps up to `timeout`, or until the queue's generation moves past `seen` (shared memory only).
/// Query cancellation and statement_timeout end the sleep at once with their usual error.
pub fn sleep(queue_name: &str, seen: Option<u64>, timeout: Duration) {
    sleep_on(slot_of(queue_name), seen, timeout);
}

/// Sleeps up to `timeout`, or until the slot's generation moves past `seen` (see `sleep`).
pub(super) fn sleep_on(slot: Option<*mut Slot>, seen: Option<u64>, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    match (slot, seen) {
        // SAFETY: the slot's condition variable was initialised; this process sleeps on one
        // condition variable at a time, and cancels the sleep on the way out.
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
        // SAFETY: this process's own latch, waited on and reset as PostgreSQL's own waits do.
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
