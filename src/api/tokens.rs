//! Fencing tokens that outlive a crash (guide, "Durable claims").
//!
//! A transaction whose only writes are claims and heartbeats commits without waiting for its WAL
//! flush (`shared::xact::lease_write`). A crash can then lose a claim after its token was handed
//! out: the job is pending again, with its previous token in the row, and the next claim must not
//! hand out the lost token a second time.
//!
//! So a token is `greatest(previous + 1, epoch << 32)`, where `epoch` is the highest in
//! `jq_token_epochs` (`known_floor`), and the first claim of each server lifetime without a row
//! there adds one, an epoch higher (`raise`), in a transaction that commits durably before any of
//! its tokens leaves the server.
//! Every token handed out so far is below `(highest epoch + 1) << 32` (a job is claimed fewer than
//! 2^32 times in one epoch), so after a crash the new lifetime's first claim lifts every job above
//! anything the crash may have lost.
//!
//! A lifetime is named by how far WAL replay got when the server started (`GetXLogReplayRecPtr`)
//! and the timeline WAL is written on (new after a promotion). Crash recovery replays at least to
//! the end of the last lifetime's starting point and whatever it flushed, so a lifetime that
//! follows a crash always has a new name; a clean start loses nothing, whatever its name.
//!
//! A promoted standby is a new lifetime too (its timeline is new), but with asynchronous
//! replication it may never have seen the old primary's latest epoch rows. So an epoch is also at
//! least `(timeline - 1) << 16`: every epoch of the old timeline stays below it (guide,
//! "Failover").

use std::cell::Cell;

use pgrx::prelude::*;
use pgrx::spi;

use crate::db;
use crate::shared::xact;

const EPOCH: &str = include_str!("../../sql/queries/token_epoch.sql");
const BUMP: &str = include_str!("../../sql/queries/token_epoch_bump.sql");

/// Tokens of one epoch: a job is claimed fewer than 2^32 times in one server lifetime.
const EPOCH_SHIFT: u32 = 32;

thread_local! {
    /// The lifetime this session last checked, and its epoch. A backend is one thread, and no
    /// session outlives a crash; one that outlives a promotion sees the timeline change.
    /// Set only once the transaction that read or raised it commits: an epoch raised by a
    /// transaction that rolled back was never on disk.
    static KNOWN: Cell<Option<((i64, i64), i64)>> = const { Cell::new(None) };
}

/// This server lifetime: (how far WAL replay got when it started, the timeline WAL is written on).
fn lifetime() -> (i64, i64) {
    let mut replay_timeline = 0;
    // SAFETY: each reads shared WAL state under its own lock; the pointer is a local. The insertion
    // timeline exists only once recovery is over (a standby's claim fails at its UPDATE anyway).
    unsafe {
        let replayed_to = pg_sys::GetXLogReplayRecPtr(&mut replay_timeline);
        let timeline = if pg_sys::RecoveryInProgress() { replay_timeline } else { pg_sys::GetWALInsertionTimeLine() };
        (replayed_to as i64, i64::from(timeline))
    }
}

/// The least token a claim may hand out now, if it is known without a write: this session saw it
/// in this lifetime, or the lifetime has its row. None: the first claim of the lifetime must
/// `raise` it. Runs no statement while this session knows the lifetime's epoch: every claim asks.
pub fn known_floor() -> spi::Result<Option<i64>> {
    let now = lifetime();
    if let Some((known, epoch)) = KNOWN.get() {
        if known == now {
            return Ok(Some(epoch << EPOCH_SHIFT));
        }
    }
    let stored = db::connect(|db| db.rows::<(Option<i64>, Option<bool>)>(EPOCH, &lifetime_args(now)))?.pop();
    let Some((Some(highest), Some(true))) = stored else {
        return Ok(None);
    };
    xact::at_commit(move || KNOWN.set(Some((now, highest))));
    Ok(Some(highest << EPOCH_SHIFT))
}

/// Raises the epoch for this lifetime (see above) and returns the new floor.
pub fn raise() -> spi::Result<i64> {
    let now = lifetime();
    // Durable whatever synchronous_commit says: the new epoch must be on disk before any other
    // session can see it (PostgreSQL shows a commit only after the flush it waits for) and before
    // this transaction's tokens leave the server.
    // SAFETY: sets a flag of the current transaction.
    unsafe { pg_sys::ForceSyncCommit() };
    let epoch = db::connect(|db| match db.rows::<(i64,)>(BUMP, &lifetime_args(now))?.pop() {
        Some((epoch,)) => Ok(epoch),
        // Another session's row for this lifetime committed in the meantime.
        None => Ok(db
            .rows::<(Option<i64>, Option<bool>)>(EPOCH, &lifetime_args(now))?
            .pop()
            .and_then(|(e, _)| e)
            .expect("the row exists")),
    })?;
    xact::at_commit(move || KNOWN.set(Some((now, epoch))));
    Ok(epoch << EPOCH_SHIFT)
}

fn lifetime_args(lifetime: (i64, i64)) -> [pgrx::datum::DatumWithOid<'static>; 2] {
    [lifetime.0.into(), lifetime.1.into()]
}

/// Runs a claim or heartbeat as a lease write (`xact::lease_write`), which may then commit without
/// its flush: the token epochs keep its tokens safe from a crash.
pub fn lease_write<R>(f: impl FnOnce() -> R) -> R {
    xact::lease_write(f)
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use super::BUMP;
    use crate::testing::*;

    /// A promoted standby's first epoch is above every epoch of the timeline before, even when the
    /// rows of the old primary's last lifetimes never reached it (guide, "Failover").
    #[pg_test]
    fn a_new_timeline_starts_above_every_epoch_of_the_one_before() {
        run(&format!("PREPARE bump(bigint, bigint) AS {BUMP}"));
        run("INSERT INTO jq_token_epochs (epoch, replayed_to, timeline) VALUES (0, 10, 1), (1, 20, 1)");
        assert_eq!(one::<i64>("EXECUTE bump(30, 2)"), 65536, "the first lifetime after a promotion");
        assert_eq!(one::<i64>("EXECUTE bump(40, 2)"), 65537, "a crash on the same timeline counts on by one");
        assert_eq!(one::<i64>("EXECUTE bump(50, 4)"), 3 * 65536, "two promotions later");
        assert_eq!(one::<i64>("EXECUTE bump(60, 1)"), 3 * 65536 + 1, "epochs never go down");
        run("DEALLOCATE bump");
    }
}
