//! The claim's last stage: what follows the jobs taken. The queue's rate counts them
//! (`admit::count`); the claim front and fairness bound learn what the claim proved
//! (`shared::front`, guide "Old snapshots" and "Fairness"); the counters count each claim's wait;
//! and the jobs come back in claim order.

use pgrx::datum::{DatumWithOid, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use super::admit::{self, Admitted};
use super::prepare::{timestamp, Front};
use super::take::{Claimed, Taken};
use super::ClaimedJob;
use crate::api::{tokens, wait::Look};
use crate::db;
use crate::shared::counters;
use crate::shared::front::{self, Key};

const FRONT: &str = include_str!("../../../sql/queries/claim_front.sql");

impl Claimed {
    /// The claimed job's place in priority order, as the front keeps it.
    fn key(&self) -> Key {
        Key { priority: self.job.3, available_at: self.order.2, id: self.job.0 }
    }
}

/// Everything after the claim statements, for what they took (`taken`) after reading `front`.
pub(super) fn claimed(
    queue_name: &str,
    front: &Front,
    admitted: Admitted,
    taken: Taken,
    now: TimestampWithTimeZone,
) -> spi::Result<Look<ClaimedJob>> {
    let Taken { mut unkeyed, fairness, mut keyed, again_at } = taken;
    admit::count(queue_name, admitted, unkeyed.len() + keyed.len())?;
    if let Some(lowest) = unkeyed.iter().map(Claimed::key).min() {
        // If this claim rolls back, its jobs are pending again, maybe below a front moved meanwhile.
        front::lower_at_rollback(queue_name, lowest);
    }
    // As with the front: only a snapshot taken after the read proves anything.
    if let (Some(fairness), true) = (fairness, db::read_committed()) {
        match &front.seen {
            Some(seen) => front::set_fair(queue_name, seen, fairness, now.into()),
            // Without shared memory a session hears of no job other sessions make pending, of
            // another priority or not: its bound comes from the oldest job alone.
            None if !front.preloaded => {
                front::set_session_fair(queue_name, fairness.oldest, fairness.limit, now.into())
            }
            None => {}
        }
    }
    if let Some(seen) = front.seen {
        move_front(queue_name, &seen, &unkeyed, now)?;
    }
    // Jobs with a concurrency key follow, in claim order among themselves (guide, "Flow control").
    unkeyed.sort_unstable_by_key(|claimed| claimed.order);
    keyed.sort_unstable_by_key(|claimed| claimed.order);
    unkeyed.extend(keyed);
    let now = pg_sys::TimestampTz::from(now);
    for claimed in &unkeyed {
        counters::claimed(queue_name, now - claimed.order.2);
    }
    Ok(Look { found: unkeyed.into_iter().map(|claimed| claimed.job).collect(), again_at })
}

/// Moves the queue's claim front up after a claim that read it as `seen` (guide, "Old snapshots";
/// the rules are in `shared::front`). The lowest job this claim took in priority order proves the
/// front when it is on the front's priority: everything between was due, and this claim's walk
/// passed it as running, locked or too new for its snapshot (whose lowering `front` checks).
/// Otherwise a look finds the first pending key, from the front, or from the start once a second.
/// Only a claim whose snapshot was taken after its read may prove anything: not one in a
/// REPEATABLE READ or SERIALIZABLE transaction.
fn move_front(queue_name: &str, seen: &front::Seen, jobs: &[Claimed], now: TimestampWithTimeZone) -> spi::Result<()> {
    if !db::read_committed() {
        return Ok(());
    }
    let in_order = jobs.iter().filter(|claimed| claimed.order.0).map(Claimed::key).min();
    let look_from = if seen.full_look_due {
        Key::BOTTOM
    } else if seen.keyed {
        return Ok(());
    } else {
        match in_order {
            Some(lowest) if lowest.priority == seen.mark.priority => {
                front::advance(queue_name, seen, lowest);
                return Ok(());
            }
            Some(_) if seen.look_due => seen.mark,
            None if seen.look_due && seen.mark == Key::BOTTOM => seen.mark,
            _ => return Ok(()),
        }
    };
    let args: [DatumWithOid; 4] =
        [queue_name.into(), look_from.priority.into(), timestamp(look_from.available_at).into(), look_from.id.into()];
    // Part of the claim: WAL it may write (pruning a page it reads) keeps a leases-only commit so.
    let found = tokens::lease_write(|| {
        db::connect(|db| db.rows::<(Option<i32>, Option<TimestampWithTimeZone>, Option<i64>, bool)>(FRONT, &args))
    })?;
    let Some((priority, available_at, id, keyed)) = found.into_iter().next() else {
        return Ok(());
    };
    let first = match (priority, available_at, id) {
        (Some(priority), Some(available_at), Some(id)) => Key { priority, available_at: available_at.into(), id },
        _ => Key::TOP,
    };
    front::install(queue_name, seen, first, keyed, look_from == Key::BOTTOM, now.into());
    Ok(())
}
