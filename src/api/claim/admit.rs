//! The claim's second stage: flow control (guide, "Flow control"). The queue's rate says how
//! many jobs this claim may take, under the queue's rate lock (`api::rates`); a queue whose
//! settings have a concurrency limit is claimed from only within its free slots, counted under the
//! queue's row lock (`free_slots`), which queues without one never take. The key limits and key
//! rates are the key rotation's (`api::keys`).

use std::sync::LazyLock;

use pgrx::prelude::*;
use pgrx::spi;

use crate::api::rates::{self, Rate};
use crate::db::{self, Session};

const ADMIT: &str = include_str!("../../../sql/queries/claim_admit.sql");
const RUNNING: &str = include_str!("../../../sql/queries/claim_running.sql");
const SLOT_FREE: &str = concat!(
    include_str!("../../../sql/queries/parts/pending_levels.sql"),
    include_str!("../../../sql/queries/claim_slot_free.sql")
);

/// `claim_slot_free.sql` with the ordering-key check taken in (`take::ordering_keys`).
pub(crate) fn slot_free() -> &'static str {
    static STATEMENT: LazyLock<String> = LazyLock::new(|| super::text::ordering_keys(SLOT_FREE, true));
    STATEMENT.as_str()
}

/// What the queue's rate lets this claim take.
pub(super) struct Admitted {
    pub batch_size: i32,
    rate: Option<rates::Admitted>,
}

/// The batch the queue's rate (`rate`, None: none) admits of `batch_size`, counted under its lock;
/// or, when it admits nothing, when its next window opens (None: another claimer holds the lock,
/// and its commit wakes a waiting claim).
pub(super) fn rate(
    queue_name: &str,
    rate: Option<Rate>,
    batch_size: i32,
    now: pg_sys::TimestampTz,
) -> spi::Result<Result<Admitted, Option<pg_sys::TimestampTz>>> {
    let Some(rate) = rate else {
        return Ok(Ok(Admitted { batch_size, rate: None }));
    };
    // A queue rate counts claims in the claim's snapshot, which must be newer than the rate lock:
    // not so in REPEATABLE READ or SERIALIZABLE (as for the key limits, `keys::claim`).
    if !db::read_committed() {
        crate::error::flow_limit_needs_read_committed(queue_name, "rate_limit");
    }
    Ok(db::connect(|db| rates::admit(db, queue_name, rate, now))?
        .map(|admitted| Admitted { batch_size: batch_size.min(admitted.free), rate: Some(admitted) }))
}

/// Counts the jobs this claim took against the queue's rate. Outside the claim's lease write: the
/// count commits durably, and with it the claim.
pub(super) fn count(queue_name: &str, admitted: Admitted, claimed: usize) -> spi::Result<()> {
    match admitted.rate {
        Some(rate) => db::connect(|db| rates::count_admitted(db, queue_name, rate, claimed)),
        None => Ok(()),
    }
}

/// How many jobs the queue's concurrency limit lets a claim take (None: no slot is free, or the
/// queue has no limit after all: the settings a claim keeps may be a moment old, and the queue's
/// row, read under its lock, decides). A waiting claim (`waiting`)
/// first checks without a lock that a slot is free and a job is claimable: the lock, once taken,
/// is held until the transaction ends, and a claim that sleeps must not hold it, or the
/// transaction id it brings.
pub(super) fn free_slots(
    db: &mut Session,
    queue_name: &str,
    waiting: bool,
    now: pgrx::datum::TimestampWithTimeZone,
) -> spi::Result<Option<i32>> {
    if waiting && !db.first::<bool>(slot_free(), &[queue_name.into(), now.into()])?.unwrap_or(false) {
        return Ok(None);
    }
    let Some(limit) = db.first::<i32>(ADMIT, &[queue_name.into()])? else {
        return Ok(None);
    };
    let running = db.first::<i64>(RUNNING, &[queue_name.into()])?.unwrap_or(0);
    let free = i64::from(limit) - running;
    Ok((free > 0).then_some(free.min(i64::from(i32::MAX)) as i32))
}
