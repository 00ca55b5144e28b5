//! Who listens: with the library preloaded, a utility hook counts the sessions that LISTEN on each
//! queue's channel, and an enqueue sends its NOTIFY only while the count is above zero.
//!
//! NOTIFY is expensive: PostgreSQL serialises the commits of notifying transactions (it holds a
//! database-wide lock from queueing the notification until the commit is flushed), which halved
//! single-job enqueue throughput in the bench. Without preload there is no count: a queue then
//! notifies only if its `notify` setting is true (see `wake`).
//!
//! A LISTEN is counted when it runs, and the count is undone if its transaction (or savepoint)
//! rolls back; an UNLISTEN takes effect when its transaction commits, as PostgreSQL's own does.
//! A LISTEN counts only when its role holds a right on the queue: anyone may LISTEN, but a
//! stranger's LISTEN must not switch on the NOTIFYs (and their cost) for the queue's producers.
//! Queues map to slots by hash, as the wake-ups do; two queues sharing a slot share a count, which
//! at worst sends a NOTIFY nobody hears.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU32, Ordering};

use pgrx::prelude::*;

use super::{queue_key, xact};

const SLOTS: usize = 1024;

/// Per slot, the sessions that LISTEN on the channel of one of its queues.
static mut COUNTS: *mut AtomicU32 = std::ptr::null_mut();
static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;

thread_local! {
    /// The jq_ channels this session counts itself a listener of. A backend is one thread.
    static LISTENING: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
    static EXIT_CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// Called while the library is preloaded: hooks utility statements to count listeners.
pub fn init() {
    // SAFETY: the postmaster is single-threaded while it loads preloaded libraries; the hook chains
    // to the one it replaces.
    unsafe {
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(count_listeners);
    }
}

pub fn shared_size() -> usize {
    std::mem::size_of::<AtomicU32>() * SLOTS
}

/// Takes the listener counts' part of shared memory (`shared_size()` bytes at `base`), zeroed when
/// `new`. Only from the shared-memory startup hook.
pub unsafe fn attach(base: *mut u8, new: bool) {
    // SAFETY: `base` holds SLOTS counters (zero bytes are a zero AtomicU32); the pointer is
    // written once per process, before any SQL function of it runs.
    unsafe {
        if new {
            std::ptr::write_bytes(base, 0, shared_size());
        }
        COUNTS = base.cast();
    }
}

fn count_of(queue_name: &str) -> Option<&'static AtomicU32> {
    // SAFETY: read-only after startup.
    let counts = unsafe { COUNTS };
    if counts.is_null() {
        return None;
    }
    // SAFETY: the index is below SLOTS; the counters live as long as the server.
    Some(unsafe { &*counts.add((queue_key::hash(queue_name) % SLOTS as u64) as usize) })
}

/// Whether anyone may be listening to the queue's channel. Without shared memory there is no
/// count, so anyone may be.
pub fn may_have_listeners(queue_name: &str) -> bool {
    count_of(queue_name).is_none_or(|count| count.load(Ordering::SeqCst) > 0)
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
    // SAFETY: PostgreSQL passes a valid planned utility statement; each cast follows the node tag
    // it was checked against, and channel names are NUL-terminated strings of the statement.
    unsafe {
        let statement = (*pstmt).utilityStmt;
        if pgrx::is_a(statement, pg_sys::NodeTag::T_ListenStmt) {
            let channel = (*statement.cast::<pg_sys::ListenStmt>()).conditionname;
            start_counting(&CStr::from_ptr(channel).to_string_lossy());
        } else if pgrx::is_a(statement, pg_sys::NodeTag::T_UnlistenStmt) {
            let channel = (*statement.cast::<pg_sys::UnlistenStmt>()).conditionname;
            let channel = (!channel.is_null()).then(|| CStr::from_ptr(channel).to_string_lossy().into_owned());
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
    if !attached() {
        return;
    }
    xact::at_commit(move || stop_counting(channel.as_deref()));
}

fn attached() -> bool {
    // SAFETY: read-only after startup.
    !unsafe { COUNTS }.is_null()
}

fn start_counting(channel: &str) {
    let Some((queue_name, count)) = channel.strip_prefix("jq_").and_then(|q| count_of(q).map(|count| (q, count)))
    else {
        return;
    };
    if !listener_may_see(queue_name) {
        return;
    }
    let new = LISTENING.with(|listening| listening.borrow_mut().insert(channel.to_owned()));
    if new {
        if !EXIT_CALLBACK_REGISTERED.get() {
            // SAFETY: registers a callback for this backend's exit, once.
            unsafe { pg_sys::before_shmem_exit(Some(stop_counting_at_exit), pg_sys::Datum::from(0)) };
            EXIT_CALLBACK_REGISTERED.set(true);
        }
        count.fetch_add(1, Ordering::SeqCst);
        // PostgreSQL forgets a LISTEN that rolls back; so does the count.
        let channel = channel.to_owned();
        xact::at_rollback(move || stop_counting(Some(&channel)));
    }
}

/// Whether the listening role holds a right on the queue, in a database with the extension.
fn listener_may_see(queue_name: &str) -> bool {
    // SAFETY: a catalog lookup by name, inside the LISTEN's transaction.
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
        if let Some(count) = channel.strip_prefix("jq_").and_then(count_of) {
            count.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn stop_counting_at_exit(_code: i32, _arg: pg_sys::Datum) {
    stop_counting(None);
}
