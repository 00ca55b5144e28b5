//! Maintenance that cannot stop silently (guide, "Maintenance"): what keeps each database's
//! queues moving (reaping expired leases, expiring jobs, the schedules' ticks, retention and the
//! day partitions of history), who does it, and when it last ran.
//!
//! With the library preloaded, a background worker does it in every database that has the
//! extension (`crate::reaper`). Where none serves the database (no preload, the worker turned off
//! with `reaper_enabled`, or all its workers busy elsewhere), claims do it instead, at most once per interval for the
//! whole database whatever the number of sessions: `inline`. `jq_maintenance` says which, and
//! whether a pass is overdue.
//!
//! The passes themselves are two, whoever runs them (the worker, a claim, `jq_reap()`,
//! `jq_prune()`): `reap` (expired leases, then expired jobs, then the due ticks: `api::reap`) and
//! `prune` (retention, then the coming days' partitions: `api::retention`). This module is their
//! one door for the worker and the claims. Each runs with settings of its own
//! (`guc::with_maintenance_settings`), never those of the session that triggered it.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::time::{Duration, Instant};

use pgrx::datum::{DatumWithOid, Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use super::{reap, retention};
use crate::db::{self, clock};
use crate::guc;
use crate::shared::served::{self, Pass};

const DUE: &str = include_str!("../../sql/queries/maintenance_due.sql");
const PASSES: &str = include_str!("../../sql/queries/maintenance_passes.sql");

/// The most finished jobs a claim's prune deletes one by one; whole days of history go at once.
const INLINE_PRUNE_MAX: i32 = 1000;

/// A pass is overdue (`stale`) once it is this many intervals late, and at least `SLACK` late.
const OVERDUE_INTERVALS: i64 = 3;
const SLACK_MICROS: i64 = 10_000_000;

thread_local! {
    /// When this session last asked whether a pass was due. A backend is one thread.
    static LAST_LOOK: Cell<Option<Instant>> = const { Cell::new(None) };
    /// When this session last reaped each queue on its own (a claim in a transaction block).
    static LAST_QUEUE_REAP: RefCell<HashMap<String, Instant>> = RefCell::new(HashMap::new());
}

/// A claim's share of the maintenance, where no worker serves the database. Off while
/// `inline_reap_max` is 0. Asked at most once per `inline_reap_interval` per session.
///
/// A claim that is its own transaction (no BEGIN around it), in READ COMMITTED, takes the passes
/// due at `now` for the whole database, each taken by one session only; its transaction ends with
/// the call, so nothing it locks (a pass's row, a partition being made) outlives it. A claim inside
/// a transaction block reaps only its own queue's expired leases: the rest would stay locked until
/// the client commits, which may be long, and holding a pass that long would stop it for every
/// other session. (In REPEATABLE READ or SERIALIZABLE it takes no pass: a pass row another session
/// marked since its snapshot would fail the claim with a serialization error, for work that is not
/// the claim's.)
pub fn inline(queue_name: &str, now: TimestampWithTimeZone) -> spi::Result<()> {
    let max = guc::INLINE_REAP_MAX.get();
    if max == 0 || worker_maintains() {
        return Ok(());
    }
    // SAFETY: a plain read of this backend's transaction state.
    if unsafe { pg_sys::IsTransactionBlock() } {
        return reap_own_queue(queue_name, now);
    }
    if !db::read_committed() || !look_due() {
        return Ok(());
    }
    let args: [DatumWithOid; 3] = [now.into(), reap_interval().into(), prune_interval().into()];
    for (pass,) in db::rows_planned_per_call::<(String,)>(DUE, &args)? {
        match pass.as_str() {
            "reap" => {
                reap_pass(max, None, now)?;
            }
            _ => {
                prune_pass(INLINE_PRUNE_MAX, retention::By::Claim)?;
            }
        }
    }
    Ok(())
}

/// The expired leases of the claim's own queue, at most once per `inline_reap_interval` per session
/// and queue: a claim in a transaction block, and each look of a waiting claim (which returns to
/// commit what it reaped rather than sleep holding it).
pub fn reap_own_queue(queue_name: &str, now: TimestampWithTimeZone) -> spi::Result<()> {
    let max = guc::INLINE_REAP_MAX.get();
    if max == 0 || worker_maintains() || !queue_reap_due(queue_name) {
        return Ok(());
    }
    reap_pass(max, Some(queue_name), now).map(|_| ())
}

/// The reap pass: up to `max_jobs` expired leases (of one queue, or all), then the expiry sweep,
/// then the due ticks, as `jq_reap()` runs them.
pub fn reap_pass(max_jobs: i32, queue_name: Option<&str>, now: TimestampWithTimeZone) -> spi::Result<reap::Reaped> {
    reap::reap_expired(max_jobs, queue_name, now)
}

/// The prune pass: retention (up to `max_jobs` jobs deleted one by one; whole days at once), then
/// the coming days' partitions, as `jq_prune()` runs them. Returns how many jobs went.
pub fn prune_pass(max_jobs: i32, by: retention::By) -> spi::Result<i32> {
    retention::prune(max_jobs, by)
}

fn queue_reap_due(queue_name: &str) -> bool {
    let every = Duration::from_millis(guc::INLINE_REAP_INTERVAL_MS.get() as u64);
    LAST_QUEUE_REAP.with(|last| {
        let mut last = last.borrow_mut();
        if last.get(queue_name).is_some_and(|at| at.elapsed() < every) {
            return false;
        }
        last.insert(queue_name.to_owned(), Instant::now());
        true
    })
}

/// Whether a background worker serves this database and runs its passes (`reaper_enabled`): where
/// it is turned off, claims take over, as where there is none.
fn worker_maintains() -> bool {
    guc::REAPER_ENABLED.get() && served::worker_serves_this_database()
}

fn look_due() -> bool {
    let every = Duration::from_millis(guc::INLINE_REAP_INTERVAL_MS.get() as u64);
    if LAST_LOOK.get().is_some_and(|at| at.elapsed() < every) {
        return false;
    }
    LAST_LOOK.set(Some(Instant::now()));
    true
}

fn reap_interval() -> Interval {
    micros_interval(i64::from(guc::INLINE_REAP_INTERVAL_MS.get()) * 1000)
}

/// None while retention passes are off (`prune_interval` = 0).
fn prune_interval() -> Option<Interval> {
    let seconds = i64::from(guc::PRUNE_INTERVAL_S.get());
    (seconds > 0).then(|| micros_interval(seconds * 1_000_000))
}

fn micros_interval(micros: i64) -> Interval {
    Interval::new(0, 0, micros).expect("a valid interval")
}

/// `jq_maintenance`'s one row: who maintains this database (`worker`, `inline` or `none`), when
/// each pass last ran here, and whether one is overdue.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_maintenance_status() -> TableIterator<
    'static,
    (
        name!(served_by, String),
        name!(last_reap_at, Option<TimestampWithTimeZone>),
        name!(last_prune_at, Option<TimestampWithTimeZone>),
        name!(last_tick_at, Option<TimestampWithTimeZone>),
        name!(stale, bool),
        name!(last_partition_at, Option<TimestampWithTimeZone>),
    ),
> {
    let status = crate::rights::as_owner(status).unwrap_or_else(|e| error!("{e}"));
    let at = |pass: Pass| status.last[pass as usize].and_then(|t| TimestampWithTimeZone::try_from(t).ok());
    TableIterator::once((
        status.served_by.to_owned(),
        at(Pass::Reap),
        at(Pass::Prune),
        at(Pass::Ticks),
        status.stale,
        at(Pass::Partitions),
    ))
}

/// What `jq_maintenance` shows, also read by `jq_metrics()`.
pub struct Status {
    pub served_by: &'static str,
    /// When each pass last ran (TimestampTz), in `Pass::ALL` order.
    pub last: [Option<i64>; 4],
    pub stale: bool,
}

/// This database's maintenance: the worker's passes (shared memory) and the claims' (the table),
/// the later of each. Expects the owner's rights, to read the table.
pub fn status() -> spi::Result<Status> {
    let served = served::this_database();
    let mut last = served.as_ref().map_or([None; 4], |served| served.passes);
    for (pass, at) in db::read_only_rows::<(String, TimestampWithTimeZone)>(PASSES, &[])? {
        let at = pg_sys::TimestampTz::from(at);
        // A claim's reap pass makes the ticks, and its prune the day partitions.
        let passes: &[Pass] = match pass.as_str() {
            "reap" => &[Pass::Reap, Pass::Ticks],
            _ => &[Pass::Prune, Pass::Partitions],
        };
        for pass in passes {
            // '-infinity': never.
            if at > i64::MIN {
                let slot = &mut last[*pass as usize];
                *slot = Some(slot.map_or(at, |known| known.max(at)));
            }
        }
    }
    let served_by = if worker_maintains() {
        "worker"
    } else if guc::INLINE_REAP_MAX.get() > 0 {
        "inline"
    } else {
        "none"
    };
    let now = pg_sys::TimestampTz::from(clock::now());
    let overdue = |pass: Pass, every_micros: i64| {
        let limit = (every_micros * OVERDUE_INTERVALS).max(SLACK_MICROS);
        last[pass as usize].is_none_or(|at| now - at > limit)
    };
    let reap_every = i64::from(if served_by == "worker" {
        guc::REAPER_INTERVAL_MS.get()
    } else {
        guc::INLINE_REAP_INTERVAL_MS.get()
    }) * 1000;
    let prune_every = i64::from(guc::PRUNE_INTERVAL_S.get()) * 1_000_000;
    let stale = served_by == "none"
        || overdue(Pass::Reap, reap_every)
        || overdue(Pass::Ticks, reap_every)
        || (prune_every > 0 && (overdue(Pass::Prune, prune_every) || overdue(Pass::Partitions, prune_every)));
    Ok(Status { served_by, last, stale })
}
