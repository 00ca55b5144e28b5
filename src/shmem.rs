//! The library's shared memory, when it is preloaded: one request for every part and one startup
//! hook that attaches each part (the wake-up slots of wake.rs, the counters of stats.rs).

use std::ffi::{c_void, CStr};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::{stats, wake};

static mut PREV_SHMEM_REQUEST: pg_sys::shmem_request_hook_type = None;
static mut PREV_SHMEM_STARTUP: pg_sys::shmem_startup_hook_type = None;

/// Called from `_PG_init` while the library is preloaded.
pub fn init() {
    unsafe {
        PREV_SHMEM_REQUEST = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(request);
        PREV_SHMEM_STARTUP = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(attach);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn request() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST {
            prev();
        }
        pg_sys::RequestAddinShmemSpace(wake::shared_size() + stats::shared_size());
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn attach() {
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP {
            prev();
        }
        let lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock; // AddinShmemInitLock
        pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        wake::attach();
        stats::attach();
        pg_sys::LWLockRelease(lock);
    }
}

/// The part named `name`, of `size` bytes, and whether it was just created (so its owner must
/// initialise it). Only from the startup hook, under AddinShmemInitLock.
pub unsafe fn part(name: &CStr, size: usize) -> (*mut c_void, bool) {
    let mut found = false;
    let base = unsafe { pg_sys::ShmemInitStruct(name.as_ptr(), size, &mut found) };
    (base, !found)
}
