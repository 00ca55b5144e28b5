//! What backends share, when the library is preloaded: the wake-up slots (`wake`) and those of
//! jobs awaited (`finish`), the counters (`counters`), the count of listeners (`listeners`), the
//! claim fronts (`front`), what every table keyed by queues follows (`queue_key`: the seeded hash,
//! the share rule, refusals), the databases the background worker serves (`served`), the utility
//! hook (`utility`), and the end-of-transaction hook they all use (`xact`); and the key locks
//! (`key_lock`), which live in PostgreSQL's own lock table and need no preload. The claim fronts,
//! and the queue keys they hash with, are shared without preload too, in a dynamic segment
//! (`segment`) that their first use makes. This module
//! owns the server hooks: it asks for one block of shared memory for every part, and at startup
//! hands each part its own piece. The parts never look each other up.
//!
//! Whether the library was preloaded has one answer, `guc::preloaded()`; without it there is no
//! shared memory but the fronts' segment, and each part says what it does then.

pub mod counters;
pub mod finish;
pub mod front;
pub mod histogram;
pub mod key_lock;
pub mod listeners;
pub mod queue_key;
pub mod segment;
pub mod served;
pub mod utility;
pub mod wake;
pub mod xact;

use std::ffi::CStr;

use pgrx::pg_sys;
use pgrx::prelude::*;

static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;

/// Called from `_PG_init` while the library is preloaded, in the postmaster.
pub fn init() {
    // SAFETY: the postmaster is single-threaded while it loads preloaded libraries, and each hook
    // chains to the one it replaces.
    unsafe {
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(request);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(attach);
    }
    utility::init();
}

#[pg_guard]
unsafe extern "C-unwind" fn request() {
    // SAFETY: PostgreSQL calls this hook once, in the postmaster, where requests are allowed.
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST {
            prev();
        }
        pg_sys::RequestAddinShmemSpace(
            wake::shared_size()
                + listeners::shared_size()
                + counters::shared_size()
                + front::shared_size()
                + finish::shared_size()
                + queue_key::shared_size()
                + served::shared_size(),
        );
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn attach() {
    // SAFETY: PostgreSQL calls this hook once per process that attaches shared memory. Each part is
    // found or created under AddinShmemInitLock, so exactly one process initialises it.
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP {
            prev();
        }
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock; // AddinShmemInitLock
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        let (base, new) = part(c"pg_jobqueue queue keys", queue_key::shared_size());
        queue_key::attach(base, new);
        let (base, new) = part(c"pg_jobqueue wake-ups", wake::shared_size());
        wake::attach(base, new);
        let (base, new) = part(c"pg_jobqueue listeners", listeners::shared_size());
        listeners::attach(base, new);
        let (base, new) = part(c"pg_jobqueue stats", counters::shared_size());
        counters::attach(base, new);
        let (base, new) = part(c"pg_jobqueue claim fronts", front::shared_size());
        front::attach(base, new);
        let (base, new) = part(c"pg_jobqueue finishes", finish::shared_size());
        finish::attach(base, new);
        let (base, new) = part(c"pg_jobqueue served databases", served::shared_size());
        served::attach(base, new);
        pg_sys::LWLockRelease(lock);
    }
}

/// The part named `name`, of `size` bytes, and whether it was just created (so its owner must
/// initialise it). Only under AddinShmemInitLock.
unsafe fn part(name: &CStr, size: usize) -> (*mut u8, bool) {
    let mut found = false;
    // SAFETY: `name` is NUL-terminated; the caller holds AddinShmemInitLock.
    let base = unsafe { pg_sys::ShmemInitStruct(name.as_ptr(), size, &mut found) };
    (base.cast(), !found)
}
