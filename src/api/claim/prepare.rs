//! The claim's first stage: what a claim starts from, read before any job is touched. Its share of
//! the database's maintenance where no worker serves it (`api::maintenance`), the floor of its
//! lease tokens (`api::tokens`), the queue's settings as this session keeps them
//! (`api::settings`), and the queue's claim front and fairness bound (`shared::front`).

use pgrx::datum::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::spi;

use crate::api::settings::{self, Settings};
use crate::api::{maintenance, tokens};
use crate::db;
use crate::guc;
use crate::rights;
use crate::shared::front::{self, Key};

pub(crate) const ANY_DUE: &str = concat!(
    include_str!("../../../sql/queries/parts/pending_levels.sql"),
    include_str!("../../../sql/queries/claim_any_due.sql")
);

/// What a claim starts from.
pub(super) struct Start {
    /// Every lease token this claim grants is above it (`api::tokens`).
    pub floor: i64,
    pub settings: Settings,
}

/// Maintenance, then the token floor and the queue's settings. None: a waiting look that would find nothing
/// and has no token epoch yet, which must not write one, or it would have to return to commit it
/// rather than sleep.
pub(super) fn start(queue_name: &str, waiting: bool, now: TimestampWithTimeZone) -> spi::Result<Option<Start>> {
    // A waiting look reaps only its own queue, and returns to commit what it reaped rather than
    // sleep holding it; the database's passes it takes as it returns (`claim_waiting`).
    if waiting {
        maintenance::reap_own_queue(queue_name, now)?;
    } else {
        maintenance::inline(queue_name, now)?;
    }
    let floor = match tokens::known_floor()? {
        Some(floor) => floor,
        None if waiting
            && !db::connect(|db| db.first::<bool>(ANY_DUE, &[queue_name.into(), now.into()]))?.unwrap_or(false) =>
        {
            return Ok(None);
        }
        None => tokens::raise()?,
    };
    // Settings changed elsewhere apply from this claim, even in a transaction that claimed before
    // they changed: PostgreSQL takes in the invalidations that tell the session to forget them at
    // each transaction's start and at each new lock, and a claim in such a transaction takes no
    // new lock (guide, "jq_configure"). Nearly free when there are none.
    rights::accept_invalidations();
    Ok(Some(Start { floor, settings: settings::of(queue_name)? }))
}

/// The queue's claim front as this claim read it, and whether no job can be starving.
pub(super) struct Front {
    /// None without preload, or with `pg_jobqueue.claim_front` off.
    pub seen: Option<front::Seen>,
    /// The fairness bound (guide, "Fairness"): the queue's, in shared memory; without preload,
    /// this session's own.
    pub fair: bool,
    pub preloaded: bool,
}

impl Front {
    /// Where the claim's index walk starts: the front, or the bottom.
    pub fn mark(&self) -> Key {
        self.seen.map_or(Key::BOTTOM, |seen| seen.mark)
    }
}

/// Reads the queue's front. Read before the claim's snapshot is taken: only what the claim then
/// sees proves anything (`after::move_front`).
pub(super) fn front(queue_name: &str, now: TimestampWithTimeZone) -> Front {
    let seen = if guc::CLAIM_FRONT.get() { front::read(queue_name, now.into()) } else { None };
    let preloaded = guc::preloaded();
    let fair = match seen {
        Some(seen) => seen.fair,
        None => !preloaded && front::session_fair(queue_name, now.into()),
    };
    Front { seen, fair, preloaded }
}

/// A time as a timestamptz argument; the front's keys are times read from jq_jobs, or infinite.
pub(super) fn timestamp(at: pg_sys::TimestampTz) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(at).unwrap_or_else(|_| TimestampWithTimeZone::negative_infinity())
}
