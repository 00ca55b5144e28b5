//! What waits for the end of the transaction: counters to add and wake-ups to send when it commits,
//! listener counts to undo when it rolls back. One hook for all of them, and it follows
//! subtransactions: what a savepoint or a PL/pgSQL exception block did is forgotten when it rolls
//! back, though the transaction around it commits, and belongs to its parent when it is released.
//!
//! The same hook lets a transaction whose only writes are claims and heartbeats commit without
//! waiting for its WAL flush (`lease_write`; guide, "Durable claims").
//!
//! An action is kept with the nesting level of the (sub)transaction that asked for it. When a
//! subtransaction at level L is released, its actions (level >= L: its own and its released
//! children's) move to level L - 1; when it rolls back, they are taken away, and the rollback ones
//! among them run. A prepared transaction commits later, maybe in another session, so at PREPARE
//! nothing runs: its counts are lost and its waiters re-check on their own.

use std::cell::{Cell, RefCell};

use pgrx::pg_sys;
use pgrx::prelude::*;

/// When an action runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum When {
    /// After the top transaction commits.
    Committed,
    /// When the (sub)transaction that asked rolls back.
    RolledBack,
}

struct Pending {
    level: i32,
    when: When,
    action: Box<dyn FnOnce()>,
}

/// What the transaction has written so far, as far as `lease_write` can tell.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Writes {
    Nothing,
    /// Only claims and heartbeats, whose WAL ends here (this backend's `XactLastRecEnd`).
    LeasesOnly(u64),
    Other,
}

thread_local! {
    /// A backend is one thread.
    static PENDING: RefCell<Vec<Pending>> = const { RefCell::new(Vec::new()) };
    static HOOKED: Cell<bool> = const { Cell::new(false) };
    static WRITES: Cell<Writes> = const { Cell::new(Writes::Nothing) };
    /// synchronous_commit as it was before a leases-only commit lowered it.
    static SAVED_SYNCHRONOUS_COMMIT: Cell<Option<i32>> = const { Cell::new(None) };
}

/// Runs `f`, which claims or extends leases and writes nothing else, and notes whether the
/// transaction's writes are still leases only. If they are when it commits, and
/// `pg_jobqueue.async_claims` is on, it commits without waiting for the WAL flush: a claim or
/// heartbeat that a crash loses is harmless (the job runs again; see `api::tokens` for why its
/// token is never handed out twice). Any other write before, between or after, in this transaction
/// or a subtransaction of it, keeps the commit as durable as the server is configured.
pub fn lease_write<R>(f: impl FnOnce() -> R) -> R {
    hook();
    // SAFETY: plain reads of this backend's transaction state.
    let (had_xid, before) =
        unsafe { (pg_sys::GetTopTransactionIdIfAny() != pg_sys::InvalidTransactionId, pg_sys::XactLastRecEnd) };
    let result = f();
    // SAFETY: as above.
    let after = unsafe { pg_sys::XactLastRecEnd };
    let leases_so_far = match WRITES.get() {
        Writes::Nothing => !had_xid,
        Writes::LeasesOnly(end) => end == before,
        Writes::Other => false,
    };
    WRITES.set(match (leases_so_far, after == before) {
        (false, _) => Writes::Other,
        (true, true) => WRITES.get(),
        (true, false) => Writes::LeasesOnly(after),
    });
    result
}

/// Makes this transaction commit as durably as the server is configured, whatever `lease_write`
/// saw: for a write inside a lease write that a crash must not lose (a rate limit's count of the
/// claim it is part of: guide, "Flow control").
pub fn durable() {
    hook();
    WRITES.set(Writes::Other);
}

/// At PRE_COMMIT: lowers synchronous_commit for this commit if the transaction wrote leases only.
fn lower_synchronous_commit_if_leases_only() {
    // SAFETY: a plain read of this backend's transaction state.
    let end = unsafe { pg_sys::XactLastRecEnd };
    if WRITES.get() == Writes::LeasesOnly(end) && crate::guc::ASYNC_CLAIMS.get() {
        // SAFETY: the setting's variable, read by RecordTransactionCommit; restored when the
        // transaction ends, however it ends.
        unsafe {
            SAVED_SYNCHRONOUS_COMMIT.set(Some(pg_sys::synchronous_commit));
            pg_sys::synchronous_commit = pg_sys::SyncCommitLevel::SYNCHRONOUS_COMMIT_OFF as i32;
        }
    }
}

fn forget_writes() {
    WRITES.set(Writes::Nothing);
    if let Some(saved) = SAVED_SYNCHRONOUS_COMMIT.take() {
        // SAFETY: restores the value saved above.
        unsafe { pg_sys::synchronous_commit = saved };
    }
}

/// Runs `action` once the transaction commits, unless the current subtransaction (or one around
/// it) rolls back first. It runs after the transaction left the proc array: its rows are visible
/// to new snapshots. It must not raise an error.
pub fn at_commit(action: impl FnOnce() + 'static) {
    push(When::Committed, Box::new(action));
}

/// Runs `action` if the current (sub)transaction, or one around it, rolls back.
pub fn at_rollback(action: impl FnOnce() + 'static) {
    push(When::RolledBack, Box::new(action));
}

fn push(when: When, action: Box<dyn FnOnce()>) {
    hook();
    // SAFETY: a plain read of the current transaction state.
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() };
    PENDING.with(|pending| pending.borrow_mut().push(Pending { level, when, action }));
}

fn hook() {
    if !HOOKED.get() {
        // SAFETY: registers two callbacks for the life of the backend, once; both functions are
        // `pg_guard`ed and take no argument.
        unsafe {
            pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut());
            pg_sys::RegisterSubXactCallback(Some(at_subtransaction_end), std::ptr::null_mut());
        }
        HOOKED.set(true);
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    let run = match event {
        pg_sys::XactEvent::XACT_EVENT_PRE_COMMIT => return lower_synchronous_commit_if_leases_only(),
        pg_sys::XactEvent::XACT_EVENT_COMMIT => Some(When::Committed),
        pg_sys::XactEvent::XACT_EVENT_ABORT => Some(When::RolledBack),
        pg_sys::XactEvent::XACT_EVENT_PREPARE => None,
        _ => return,
    };
    forget_writes();
    let actions = PENDING.with(|pending| std::mem::take(&mut *pending.borrow_mut()));
    run_all(actions, run);
}

/// Called while the ending subtransaction is still the current one, at its level.
#[pg_guard]
unsafe extern "C-unwind" fn at_subtransaction_end(
    event: pg_sys::SubXactEvent::Type,
    _subxid: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    // SAFETY: a plain read of the current transaction state.
    let level = unsafe { pg_sys::GetCurrentTransactionNestLevel() };
    match event {
        pg_sys::SubXactEvent::SUBXACT_EVENT_COMMIT_SUB => PENDING.with(|pending| {
            pending.borrow_mut().iter_mut().filter(|p| p.level >= level).for_each(|p| p.level = level - 1);
        }),
        pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB => {
            let undone = PENDING.with(|pending| {
                let mut pending = pending.borrow_mut();
                let (undone, kept): (Vec<_>, Vec<_>) =
                    std::mem::take(&mut *pending).into_iter().partition(|p| p.level >= level);
                *pending = kept;
                undone
            });
            run_all(undone, Some(When::RolledBack));
        }
        _ => {}
    }
}

fn run_all(actions: Vec<Pending>, run: Option<When>) {
    for pending in actions {
        if Some(pending.when) == run {
            (pending.action)();
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use pgrx::prelude::*;

    use super::{at_commit, at_rollback, PENDING};
    use crate::db::in_subtransaction;

    fn pending() -> usize {
        PENDING.with(|pending| pending.borrow().len())
    }

    /// The test's own transaction never commits, so what is seen here is what waits: a savepoint
    /// that rolls back takes its actions (and runs its rollback ones), one that is released leaves
    /// them to its parent, at any depth.
    #[pg_test]
    fn a_rolled_back_subtransaction_takes_its_actions_and_a_released_one_keeps_them() {
        let before = pending();
        let undone = Rc::new(Cell::new(0));
        at_commit(|| ());
        let failed: Result<(), String> = in_subtransaction(|| {
            at_commit(|| ());
            let undone = undone.clone();
            at_rollback(move || undone.set(undone.get() + 1));
            let _ = in_subtransaction(|| {
                at_commit(|| ());
                Ok(())
            });
            panic!("roll back");
        });
        assert!(failed.is_err());
        assert_eq!(pending(), before + 1, "the rolled-back savepoint's actions stayed");
        assert_eq!(undone.get(), 1, "its rollback action did not run");

        let kept = in_subtransaction(|| {
            at_commit(|| ());
            let inner = in_subtransaction(|| {
                at_commit(|| ());
                Ok(())
            });
            assert!(inner.is_ok());
            Ok(())
        });
        assert!(kept.is_ok());
        assert_eq!(pending(), before + 3, "a released savepoint's actions were lost");
        assert_eq!(undone.get(), 1);
    }
}

/// This backend's local transaction id, which no two of its transactions share: what a note kept
/// for one transaction is tagged with, so that the next one ignores it.
pub fn this_transaction() -> u32 {
    crate::version::local_transaction_id()
}
