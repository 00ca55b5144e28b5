//! Wake-ups: hints that a queue may have claimable work. The table stays the only truth; a hint
//! that is lost costs latency, never a job, because a waiting claim also re-checks on its own.
//!
//! Two kinds, both sent only after the enqueuing transaction commits:
//! - `NOTIFY "jq_<queue>"` for LISTEN clients, unless the queue's `notify` setting is off;
//! - with the library preloaded, a generation counter and condition variable per queue in shared
//!   memory, for waiting claims. These need no LISTEN, so they work through transaction pooling.
//!
//! Queues map to a fixed number of slots by hash; two queues sharing a slot only wake each other
//! spuriously, and a spurious wake costs one empty claim.

use std::cell::{Cell, RefCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pgrx::prelude::*;
use pgrx::spi::{self, SpiClient};
use pgrx::IntoDatum;

use crate::plans;
use crate::spi_util::first_value;

const NOTIFY_SETTING: &str = include_str!("../sql/queries/queue_notify.sql");

/// Enough that unrelated queues rarely share a slot; 40 kB of shared memory.
const SLOTS: usize = 1024;

/// How long a session trusts what it read of a queue's `notify` setting.
const SETTING_TTL: Duration = Duration::from_secs(1);

#[repr(C)]
struct Slot {
    generation: AtomicU64,
    cv: pg_sys::ConditionVariable,
}

/// The slot array in shared memory; null unless the library was preloaded. Set in the postmaster
/// before any backend is forked, read-only afterwards.
static mut SHARED: *mut Slot = std::ptr::null_mut();
static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;

/// Called from `_PG_init` while the library is preloaded: asks for the slots' shared memory.
pub fn init_shared_memory() {
    unsafe {
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(request_shared_memory);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(attach_shared_memory);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn request_shared_memory() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST {
            prev();
        }
        pg_sys::RequestAddinShmemSpace(std::mem::size_of::<Slot>() * SLOTS);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn attach_shared_memory() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP {
            prev();
        }
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock; // AddinShmemInitLock
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let mut found = false;
        let slots = pg_sys::ShmemInitStruct(
            c"pg_jobqueue wake-ups".as_ptr(),
            std::mem::size_of::<Slot>() * SLOTS,
            &mut found,
        )
        .cast::<Slot>();
        if !found {
            for i in 0..SLOTS {
                let slot = slots.add(i);
                (&raw mut (*slot).generation).write(AtomicU64::new(0));
                pg_sys::ConditionVariableInit(&raw mut (*slot).cv);
            }
        }
        SHARED = slots;
        pg_sys::LWLockRelease(lock);
    }
}

fn slot_of(queue_name: &str) -> Option<*mut Slot> {
    let shared = unsafe { SHARED };
    if shared.is_null() {
        return None;
    }
    // DefaultHasher::new() has fixed keys: every backend maps a name to the same slot.
    let mut hasher = DefaultHasher::new();
    queue_name.hash(&mut hasher);
    Some(unsafe { shared.add((hasher.finish() % SLOTS as u64) as usize) })
}

/// Whether waiting claims are woken through shared memory (the library was preloaded).
pub fn shared() -> bool {
    !unsafe { SHARED }.is_null()
}

thread_local! {
    /// Slots to bump when the current transaction commits. A backend is one thread.
    static PENDING: RefCell<Vec<*mut Slot>> = const { RefCell::new(Vec::new()) };
    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
    /// What this session last read of each queue's `notify` setting, and when.
    static NOTIFY_ON: RefCell<HashMap<String, (bool, Instant)>> = RefCell::new(HashMap::new());
}

/// Records that this transaction enqueued jobs into the queue: LISTEN clients and waiting claimers
/// are told once it commits, and never if it rolls back.
pub fn after_enqueue(client: &mut SpiClient, queue_name: &str) -> spi::Result<()> {
    if notify_enabled(client, queue_name)? {
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

/// NOTIFY is transactional: PostgreSQL delivers it at commit, drops it on rollback (of the
/// transaction or of the subtransaction that sent it), and folds duplicates within a transaction
/// into one, which gives SPEC's "at most one per queue per transaction".
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
    let on = first_value::<bool>(plans::run(client, NOTIFY_SETTING, &[queue_name.into()])?)?.unwrap_or(true);
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
    if bump {
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
