//! Reaping: expired leases back to pending work (after backoff) or to dead, and pending jobs past
//! their `expires_at` to cancelled (the expiry sweep). `jq_reap()`, the background worker and a
//! claim's maintenance of its database (`api::maintenance`) all run `reap_expired`, which does both.
//!
//! One row must never stop reaping for everyone: a statement that fails on one row fails for all
//! of them. So each pass runs in a subtransaction, and when it fails, its rows are taken one by
//! one, each in a subtransaction of its own. A row that fails on its own is logged (once per
//! session), and this session's later passes leave it out for `SKIP_FOR`, then try it again: a
//! fault that is mended (a trigger dropped, a constraint fixed) lets the row be reaped.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use pgrx::datum::{DatumWithOid, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use crate::db::{self, clock, in_subtransaction};
use crate::input;
use crate::shared::counters::{self, Counter};
use crate::shared::{finish, front};

const REAP: &str = include_str!("../../sql/queries/reap.sql");
const EXPIRED: &str = include_str!("../../sql/queries/reap_expired_ids.sql");
const EXPIRE: &str = include_str!("../../sql/queries/expire.sql");
const EXPIRE_DUE: &str = include_str!("../../sql/queries/expire_due_ids.sql");

/// The fewest rows of jq_job_dependencies a pass settles (guide, "Workflows"), whatever its
/// `max_jobs`: a claim's pass releases a fan-out a hundred jobs a second where no worker serves the
/// database.
const SETTLE_AT_LEAST: i32 = 100;

/// How long a row whose reap failed on its own is left out before it is tried again: long enough
/// that it costs the passes nothing, short enough that a mended row is reaped soon.
const SKIP_FOR: Duration = Duration::from_secs(10);

thread_local! {
    /// Jobs whose reap (or expiry) failed on their own in this session, and when. A backend is one
    /// thread.
    static SKIPPED: RefCell<BTreeMap<i64, Instant>> = const { RefCell::new(BTreeMap::new()) };
    /// Jobs whose failure this session has logged.
    static LOGGED: RefCell<BTreeSet<i64>> = const { RefCell::new(BTreeSet::new()) };
    /// Whether this session logged a failed tick pass.
    static TICKS_FAILED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether this session logged a failed pass over ended dependencies.
    static SETTLE_FAILED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Reaps up to `max_jobs` expired leases in one statement; returns how many it reaped. Rows that a
/// worker holds locked right now (it is completing them) are skipped, not waited for. Then cancels
/// up to `max_jobs` pending jobs past their `expires_at`, releases or cancels up to `max_jobs`
/// dependent jobs whose dependency ended (guide, "Workflows"), and makes the schedules' due ticks
/// (guide, "Schedules"). Maintenance of every queue: only those
/// the owner grants EXECUTE may call it.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_reap(max_jobs: default!(Option<i32>, 10000)) -> spi::Result<i32> {
    let max_jobs = input::max_jobs(max_jobs);
    crate::rights::as_owner(|| reap_expired(max_jobs, None, clock::now()).map(|reaped| reaped.leases))
}

/// Reaps up to `max_jobs` leases expired at `now`, of one queue or of all, and cancels up to as
/// many pending jobs expired by then; over all queues, makes the schedules' due ticks too. Returns
/// the leases reaped, and whether the ticks were made. Expects the extension's schema on the
/// search_path (SQL functions pin it; the background worker sets it); runs with maintenance's own
/// settings, whoever calls it.
pub fn reap_expired(max_jobs: i32, queue_name: Option<&str>, now: TimestampWithTimeZone) -> spi::Result<Reaped> {
    crate::guc::with_maintenance_settings(|| reap_with_own_settings(max_jobs, queue_name, now))
}

fn reap_with_own_settings(max_jobs: i32, queue_name: Option<&str>, now: TimestampWithTimeZone) -> spi::Result<Reaped> {
    let leases = robustly(Pass::Leases, max_jobs, queue_name, now)?;
    robustly(Pass::Expiry, max_jobs, queue_name, now)?;
    // The workflows' rows whose dependency ended and the schedules' ticks belong to the passes
    // over every queue: jq_reap(), the background worker and a claim's maintenance of its
    // database, not a pass over one queue. Each in a subtransaction of its own, so that one that
    // fails as a whole leaves the rest done.
    let mut ticked = false;
    if queue_name.is_none() {
        // At least SETTLE_AT_LEAST rows: a claim's pass (inline_reap_max, 10) would otherwise
        // release a fan-out ten jobs a second.
        let most = max_jobs.max(SETTLE_AT_LEAST);
        if let Err(message) = in_subtransaction(|| super::dependencies::settle_ended(most, now)) {
            if !SETTLE_FAILED.replace(true) {
                warning!(
                    "pg_jobqueue: the pass over ended dependencies failed, and is tried again at every pass: {message}"
                );
            }
        }
        match in_subtransaction(|| super::schedules::tick(now)) {
            Ok(_) => ticked = true,
            Err(message) => {
                if !TICKS_FAILED.replace(true) {
                    warning!(
                        "pg_jobqueue: the schedules' tick pass failed, and is tried again at every pass: {message}"
                    );
                }
            }
        }
    }
    Ok(Reaped { leases, ticked })
}

/// What a reap pass did.
pub struct Reaped {
    /// Expired leases reaped.
    pub leases: i32,
    /// Whether the schedules' due ticks were made.
    pub ticked: bool,
}

#[derive(Clone, Copy)]
enum Pass {
    /// Expired leases (reap.sql).
    Leases,
    /// Pending jobs past their `expires_at` (expire.sql).
    Expiry,
}

impl Pass {
    /// What the log says of a row the pass failed on.
    fn failed(self, id: i64) -> String {
        match self {
            Pass::Leases => format!("the expired lease of job {id} could not be reaped"),
            Pass::Expiry => format!("job {id} could not be cancelled as expired"),
        }
    }
}

/// One pass in a subtransaction; if it fails, its rows one by one (see the top of this file).
/// Returns how many rows it changed.
fn robustly(pass: Pass, max_jobs: i32, queue_name: Option<&str>, now: TimestampWithTimeZone) -> spi::Result<i32> {
    let skipped: Vec<i64> = SKIPPED.with(|skipped| {
        let mut skipped = skipped.borrow_mut();
        skipped.retain(|_, at| at.elapsed() < SKIP_FOR);
        skipped.keys().copied().collect()
    });
    if let Ok(changed) = in_subtransaction(|| run(pass, max_jobs, now, queue_name, &skipped, None)) {
        return Ok(changed);
    }
    let args = [max_jobs.into(), now.into(), queue_name.into(), skipped.clone().into()];
    let due = match pass {
        Pass::Leases => EXPIRED,
        Pass::Expiry => EXPIRE_DUE,
    };
    let ids = db::rows_planned_per_call::<(i64,)>(due, &args)?;
    let mut changed = 0;
    for (id,) in ids {
        match in_subtransaction(|| run(pass, 1, now, queue_name, &skipped, Some(id))) {
            Ok(n) => changed += n,
            Err(message) => {
                if LOGGED.with(|logged| logged.borrow_mut().insert(id)) {
                    warning!(
                        "pg_jobqueue: {}; the others were, and it is tried again every {} s: {message}",
                        pass.failed(id),
                        SKIP_FOR.as_secs()
                    );
                }
                SKIPPED.with(|skipped| skipped.borrow_mut().insert(id, Instant::now()));
            }
        }
    }
    Ok(changed)
}

/// One statement of the pass: up to `max_jobs` rows (only job `only`, if given), not those of
/// `skipped`. Planned for these arguments on each call (one queue or all make different plans), and
/// run read-write without taking a transaction id up front: a pass that finds nothing writes nothing.
fn run(
    pass: Pass,
    max_jobs: i32,
    now: TimestampWithTimeZone,
    queue_name: Option<&str>,
    skipped: &[i64],
    only: Option<i64>,
) -> spi::Result<i32> {
    let args: [DatumWithOid; 5] =
        [max_jobs.into(), now.into(), queue_name.into(), skipped.to_vec().into(), only.into()];
    let changed = match pass {
        Pass::Leases => {
            let rows = db::rows_planned_per_call::<(i64, String, bool, bool)>(REAP, &args)?;
            for (_, queue_name, dead, _) in &rows {
                counters::count(queue_name, Counter::LeaseExpirations);
                counters::count(queue_name, if *dead { Counter::Deaths } else { Counter::Retries });
                if !*dead {
                    front::forget_at_commit(queue_name);
                }
            }
            let died: Vec<i64> = rows.iter().filter(|(_, _, dead, _)| *dead).map(|(id, ..)| *id).collect();
            finish::at_commit(&died);
            let awaited = rows.iter().filter(|(_, _, dead, dependents)| *dead && *dependents).map(|(id, ..)| *id);
            ended(awaited.collect(), now)?;
            rows.len()
        }
        Pass::Expiry => {
            let rows = db::rows_planned_per_call::<(i64, String, bool)>(EXPIRE, &args)?;
            for (_, queue_name, _) in &rows {
                counters::count(queue_name, Counter::Cancellations);
            }
            finish::at_commit(&rows.iter().map(|(id, ..)| *id).collect::<Vec<_>>());
            ended(rows.iter().filter(|(_, _, dependents)| *dependents).map(|(id, ..)| *id).collect(), now)?;
            rows.len()
        }
    };
    Ok(i32::try_from(changed).expect("at most max_jobs rows"))
}

/// Jobs this pass ended dead or cancelled that others depend on: those are cancelled too (guide,
/// "Workflows").
fn ended(ids: Vec<i64>, now: TimestampWithTimeZone) -> spi::Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    db::connect(|db| super::dependencies::ended(db, ids, now))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn reap_returns_expired_leases_to_pending_or_dead() {
        let retried = enqueue("q");
        let spent = one::<i64>("SELECT jq_enqueue('q', '{}', max_attempts => 1)");
        let healthy = enqueue("q");
        let (_, t1) = claim("q", "w1", "1 second").unwrap();
        let (_, t2) = claim("q", "w2", "1 second").unwrap();
        claim("q", "w3", "1 hour").unwrap();
        sleep(1.1);
        assert_eq!(one::<i32>("SELECT jq_reap()"), 2);
        assert_eq!(
            (status(retried), status(spent), status(healthy)),
            ("pending".into(), "dead".into(), "running".into())
        );
        assert!(one::<bool>(&format!(
            "SELECT last_error_code = 'LEASE_EXPIRED' AND lease_owner IS NULL AND available_at > clock_timestamp()
             FROM jq_jobs WHERE id = {retried}"
        )));
        assert!(one::<bool>(&format!(
            "SELECT bool_and(event = 'lease_expired' AND error_code = 'LEASE_EXPIRED')
                AND count(*) = 2
                AND bool_or(job_id = {retried} AND worker = 'w1' AND lease_token = {t1} AND status = 'pending')
                AND bool_or(job_id = {spent} AND worker = 'w2' AND lease_token = {t2} AND status = 'dead')
             FROM jq_job_events"
        )));
        assert_eq!(one::<i32>("SELECT jq_reap()"), 0);
    }

    #[pg_test]
    fn reap_takes_at_most_max_jobs() {
        run("SELECT jq_enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[5]))");
        run("SELECT count(*) FROM jq_claim('q', 'w', interval '1 second', 5)");
        sleep(1.1);
        assert_eq!(one::<i32>("SELECT jq_reap(2)"), 2);
        assert_eq!(one::<i32>("SELECT jq_reap(10)"), 3);
    }

    #[pg_test]
    fn a_stale_token_is_refused_after_reap_and_reclaim() {
        let id = one::<i64>("SELECT jq_enqueue('q', '{}', run_at => clock_timestamp() - interval '1 hour')");
        let (_, old) = claim("q", "a", "1 second").unwrap();
        sleep(1.1);
        assert_eq!(one::<i32>("SELECT jq_reap()"), 1);
        run(&format!("UPDATE jq_live_jobs SET available_at = clock_timestamp() WHERE id = {id}"));
        let (_, new) = claim("q", "a", "1 minute").unwrap();
        assert!(new > old, "the fencing token must grow");
        let before = row_text(id);
        assert!(!complete(id, "a", old), "same worker name, stale token");
        assert!(!heartbeat(id, "a", old));
        assert!(!fail(id, "a", old));
        assert_eq!(row_text(id), before);
        assert!(complete(id, "a", new));
        assert_eq!(one::<i32>(&format!("SELECT attempt_count FROM jq_jobs WHERE id = {id}")), 2);
    }

    /// Without a background worker (this test server does not preload the library), a claim inside
    /// a transaction block (as every test here is) first reaps expired leases of its own queue, and
    /// only of its own queue (guide, "Maintenance"); a claim that is its own transaction takes the
    /// database's passes (tests/harness/tests/maintenance.rs).
    #[pg_test]
    fn a_claim_in_a_transaction_block_recovers_expired_leases_of_its_queue() {
        run("SET LOCAL pg_jobqueue.inline_reap_interval = 0");
        let stuck = enqueue("q");
        let other_queue = enqueue("other");
        claim("q", "dead-worker", "1 second").unwrap();
        claim("other", "dead-worker", "1 second").unwrap();
        sleep(1.1);
        assert_eq!(claim("q", "live-worker", "30 s"), None, "the reaped job waits out its backoff");
        assert_eq!(status(stuck), "pending");
        assert_eq!(status(other_queue), "running", "another queue's lease is left to its own claimers");
        assert!(one::<bool>(&format!(
            "SELECT event = 'lease_expired' AND worker = 'dead-worker' FROM jq_job_events WHERE job_id = {stuck}"
        )));
        run(&format!("UPDATE jq_live_jobs SET available_at = clock_timestamp() WHERE id = {stuck}"));
        assert_eq!(claim("q", "live-worker", "30 s").map(|c| c.0), Some(stuck));
    }

    /// Asserts that, with `setting`, a claim made after another worker's lease expired leaves that
    /// lease alone.
    fn assert_no_inline_recovery_with(setting: &str) {
        run(&format!("SET LOCAL {setting}"));
        let stuck = enqueue("q");
        claim("q", "dead-worker", "1 second").unwrap();
        sleep(1.1);
        assert_eq!(claim("q", "live-worker", "30 s"), None);
        assert_eq!(status(stuck), "running", "{setting}");
    }

    /// A session recovers a queue inline at most once per inline_reap_interval: its first claim of
    /// the queue (which found nothing to reap) starts the interval.
    #[pg_test]
    fn inline_recovery_waits_out_its_interval() {
        assert_no_inline_recovery_with("pg_jobqueue.inline_reap_interval = '1h'");
    }

    #[pg_test]
    fn inline_recovery_can_be_turned_off() {
        assert_no_inline_recovery_with("pg_jobqueue.inline_reap_max = 0");
    }
}
