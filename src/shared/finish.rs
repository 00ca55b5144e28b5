//! Wake-ups for callers waiting for a job to finish (`jq_await`; guide, "Results and waiting"),
//! when the library is preloaded: a generation counter and condition variable per slot in shared
//! memory, jobs mapped to slots by hash, like the queues' wake-ups (`wake`). Two jobs sharing a
//! slot only wake each other's waiters spuriously, and a spurious wake costs one look: this is the
//! only effect a job of one role (or database) can have on another's waiter, and since the hash is
//! seeded with the server's secret (`queue_key`), nobody can choose a job that shares another's
//! slot. Nothing here is taken or held per job, so there is nothing to fill.
//!
//! A job that finishes (succeeds, dies, or is cancelled) moves its slot on at commit, so a woken
//! waiter finds the finished row; only while someone waits anywhere on the server (a count of
//! waiters, read at commit), so that a completion nobody awaits costs a commit callback and one
//! atomic read. A waiter that ends without taking itself off the count (its backend died) costs
//! completions a needless wake-up of a slot nobody sleeps on, never a missed one. The count is the
//! server's, so a waiter anywhere makes every finish broadcast on its slot: one atomic increment and
//! a condition variable's broadcast, which finds no sleeper, per finished job.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::wake::{self, Slot};
use super::{queue_key, xact};

/// Enough that two jobs awaited at once rarely share a slot.
const SLOTS: usize = 1024;

#[repr(C)]
struct Header {
    /// Sessions in jq_await now, on the whole server.
    waiting: AtomicU32,
}

/// The header, then the slots; null unless the library was preloaded. Set when the process
/// attaches shared memory, read-only afterwards.
static mut HEADER: *mut Header = std::ptr::null_mut();
static mut SHARED: *mut Slot = std::ptr::null_mut();

pub fn shared_size() -> usize {
    slots_offset() + std::mem::size_of::<Slot>() * SLOTS
}

/// The slots start after the header, aligned for a slot.
fn slots_offset() -> usize {
    std::mem::size_of::<Header>().next_multiple_of(std::mem::align_of::<Slot>())
}

/// Takes this part of shared memory (`shared_size()` bytes at `base`), initialising it when `new`.
/// Only from the shared-memory startup hook.
pub unsafe fn attach(base: *mut u8, new: bool) {
    let header = base.cast::<Header>();
    // SAFETY: `base` holds the header and the slots; the creating process initialises them before
    // any other process can attach, and each process sets its pointers once, before any SQL
    // function of it runs.
    unsafe {
        if new {
            header.write(Header { waiting: AtomicU32::new(0) });
        }
        HEADER = header;
        SHARED = wake::init_slots(base.add(slots_offset()), new, SLOTS);
    }
}

fn slot_of(job_id: i64) -> Option<*mut Slot> {
    // SAFETY: read-only after startup.
    let shared = unsafe { SHARED };
    if shared.is_null() {
        return None;
    }
    // SAFETY: the index is below SLOTS.
    Some(unsafe { shared.add((queue_key::job_hash(job_id) % SLOTS as u64) as usize) })
}

fn header() -> Option<&'static Header> {
    // SAFETY: read-only after startup; the header lives as long as the server.
    unsafe { HEADER.as_ref() }
}

/// The jobs finished in this transaction: their waiters are woken once it commits, not if it rolls
/// back. One commit callback per call, however many jobs (a batch completion passes them all).
///
/// Whether anyone waits is asked at commit, not now: a waiter that counts itself after this call
/// but before the commit would otherwise sleep through it. Asked at commit, either the count
/// already holds the waiter, and the slot moves on, or the waiter counts itself after the commit
/// is visible, and its next look, which follows its count, finds the job finished.
pub fn at_commit(job_ids: &[i64]) {
    let Some(header) = header() else { return };
    if job_ids.is_empty() {
        return;
    }
    let slots: Vec<*mut Slot> = job_ids.iter().filter_map(|id| slot_of(*id)).collect();
    xact::at_commit(move || {
        if header.waiting.load(Ordering::SeqCst) > 0 {
            for slot in slots {
                // SAFETY: slots live as long as the server; the condition variable was initialised.
                unsafe { wake::bump(slot) };
            }
        }
    });
}

/// A session waiting for a job: counted while it lives. The count is raised before the waiter's
/// first look, so that a finish committing after that look sees it and wakes the slot.
pub struct Waiter {
    job_id: i64,
}

impl Waiter {
    pub fn new(job_id: i64) -> Waiter {
        if let Some(h) = header() {
            h.waiting.fetch_add(1, Ordering::SeqCst);
        }
        Waiter { job_id }
    }

    /// The job's slot generation, to be read before each look. None without shared memory.
    pub fn generation(&self) -> Option<u64> {
        // SAFETY: slots live as long as the server.
        slot_of(self.job_id).map(|slot| unsafe { wake::generation_of(slot) })
    }

    /// Sleeps up to `timeout`, or until the job's slot moves past `seen`; cancellation and
    /// statement_timeout end it at once.
    pub fn sleep(&self, seen: Option<u64>, timeout: Duration) {
        wake::sleep_on(slot_of(self.job_id), seen, timeout);
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if let Some(h) = header() {
            h.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}
