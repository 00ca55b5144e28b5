//! jq_prune: retention, bounded by `max_jobs` so that a large backlog is worked off in short
//! transactions. The background reaper runs the same `prune` every `pg_jobqueue.prune_interval`.
//!
//! Succeeded jobs live in jq_job_history, one partition per day (guide, "Storage"). A prune first
//! makes the partitions of the coming days, then truncates and drops each day that every queue in it
//! keeps no longer (no rows deleted, nothing left for vacuum), then deletes row by row what no whole
//! day took: jobs of a queue with a shorter retention than another of its day, jobs in the default
//! partition, and cancelled jobs, which stay in the hot table. It also forgets the counts of rate
//! windows that are over, and the rights of roles that were dropped.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;

use crate::db::{self, clock};
use crate::shared::key_lock::KeyLock;
use crate::{input, rights};

const DAYS_MISSING: &str = include_str!("../../sql/queries/history_days_missing.sql");
const DAYS_EXPIRED: &str = include_str!("../../sql/queries/history_days_expired.sql");
const DAY_DEPENDED_ON: &str = include_str!("../../sql/queries/history_day_depended_on.sql");
const PRUNE_HISTORY: &str = include_str!("../../sql/queries/prune_history.sql");
const PRUNE_CANCELLED: &str = include_str!("../../sql/queries/prune_cancelled.sql");
const PRUNE_RATE_COUNTS: &str = include_str!("../../sql/queries/prune_rate_counts.sql");
const PRUNE_GRANTS: &str = include_str!("../../sql/queries/prune_grants.sql");

/// How long partition DDL waits for its lock before it gives up until the next prune. Attaching a
/// day and truncating an expired one wait only for readers of jq_jobs; dropping a day takes an
/// ACCESS EXCLUSIVE lock on jq_job_history, so completions queue behind it while it waits.
const ATTACH_LOCK_TIMEOUT: &str = "1s";
const TRUNCATE_LOCK_TIMEOUT: &str = "1s";
const DROP_LOCK_TIMEOUT: &str = "100ms";
const HOLD_COMPLETIONS: &str = "LOCK TABLE jq_job_history IN SHARE MODE";
/// The same DDL made by a claim (`api::maintenance`) waits at most this long for any lock: a claim
/// may hold rows another transaction then waits for, so it must give up long before the deadlock
/// check (deadlock_timeout, 1 s by default) would pick a victim, which could be that other
/// transaction. What it gives up on, a later prune makes.
const CLAIM_LOCK_TIMEOUT: &str = "50ms";
/// The key lock (`shared::key_lock`, of a queue name no queue has) that one prune at a time holds
/// while it changes history (`history_lock`).
const HISTORY_LOCK: (&str, &str) = ("", "history");

/// Who runs a prune, which says how long its partition DDL may wait for a lock.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum By {
    /// jq_prune() or the background worker.
    Maintenance,
    /// A claim, taking its database's prune pass.
    Claim,
}

impl By {
    fn lock_timeout(self, own: &'static str) -> &'static str {
        match self {
            By::Maintenance => own,
            By::Claim => CLAIM_LOCK_TIMEOUT,
        }
    }
}

/// Deletes succeeded and cancelled jobs older than their queue's retention, with their events: whole
/// expired days of history at once, then up to `max_jobs` more one by one. Returns how many; call it
/// until it returns less than `max_jobs`. Maintenance of every queue: only those the owner grants
/// EXECUTE may call it.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_prune(max_jobs: default!(Option<i32>, 10000)) -> spi::Result<i32> {
    let max_jobs = input::max_jobs(max_jobs);
    rights::as_owner(|| prune(max_jobs, By::Maintenance))
}

/// The body of `jq_prune`, also run by the background worker. What it only reads, it reads
/// read-only, so a prune that finds nothing to do takes no transaction id. Runs with maintenance's
/// own settings, whoever calls it.
pub fn prune(max_jobs: i32, by: By) -> spi::Result<i32> {
    crate::guc::with_maintenance_settings(|| prune_with_own_settings(max_jobs, by))
}

fn prune_with_own_settings(max_jobs: i32, by: By) -> spi::Result<i32> {
    let now = clock::now();
    // History, its days and its rows, one session at a time (see `history_lock`); a session that
    // finds it taken leaves history to the one that holds it and prunes the rest.
    let history = history_lock();
    let whole_days = if history { change_days(now, by)? } else { 0 };
    let cancelled = db::count_planned_per_call(PRUNE_CANCELLED, &[max_jobs.into(), now.into()])?;
    let rows = if history {
        db::count_planned_per_call(PRUNE_HISTORY, &[(max_jobs - cancelled).into(), now.into()])?
    } else {
        0
    };
    // Not jobs: not counted in what jq_prune returns.
    db::count_planned_per_call(PRUNE_RATE_COUNTS, &[max_jobs.into(), now.into()])?;
    db::rows_planned_per_call::<()>(PRUNE_GRANTS, &[])?;
    Ok(whole_days.saturating_add(cancelled).saturating_add(rows))
}

/// Takes the key lock under which one prune at a time changes history, without waiting, and keeps
/// it until the transaction ends (when what that prune made is seen by all); false when another
/// session holds it.
///
/// Two prunes at once (the background worker's first pass and a claim's just after CREATE
/// EXTENSION, or jq_prune beside either) deadlocked: making the same days, each held a lock the
/// other's next DDL needed (the SHARE lock on jq_job_history against the other's ATTACH, a new
/// day's name against the other's CREATE); and the row-by-row prune of one read the default
/// partition, which the other's ATTACH locks, before it waited for the other's SHARE lock. One of
/// them waited `deadlock_timeout` to be chosen as the victim, a claim meanwhile holding its rows.
fn history_lock() -> bool {
    match KeyLock::try_take(HISTORY_LOCK.0, HISTORY_LOCK.1) {
        Some(lock) => {
            lock.keep();
            true
        }
        None => {
            debug1!("pg_jobqueue: another session is pruning the history");
            false
        }
    }
}

/// History's days: makes those from the day of `now` to two days later that are missing, then
/// truncates and drops those that no queue keeps any longer. Returns how many jobs the dropped
/// days held.
fn change_days(now: TimestampWithTimeZone, by: By) -> spi::Result<i32> {
    add_days(db::read_only_rows(DAYS_MISSING, &[now.into()])?, by);
    drop_expired_days(db::read_only_rows(DAYS_EXPIRED, &[now.into()])?, by)
}

/// Makes the `missing` days. A day that cannot be made now (its lock was not granted in time, or
/// the default partition holds jobs of that day) is left to the next prune; its jobs go to the
/// default partition meanwhile.
fn add_days(missing: Vec<(String, String, String, String, bool)>, by: By) {
    for (create, by_id, by_queue, attach, current) in missing {
        // Today's day, made late (the first prune after install, or after days without one):
        // completions in flight route today's jobs to the default partition, and one that does so
        // after the ATTACH commits fails its partition check. So the attach first waits for the
        // completions in flight and holds new ones off until it commits (SHARE conflicts with
        // their ROW EXCLUSIVE); those then route to the new day. Days made ahead need no such lock.
        let mut statements = vec![create.as_str(), &by_id, &by_queue, &attach];
        if current {
            statements.insert(0, HOLD_COMPLETIONS);
        }
        if let Err(why) = ddl(&statements, by.lock_timeout(ATTACH_LOCK_TIMEOUT)) {
            debug1!("pg_jobqueue: a day of history is not made yet: {why}");
        }
    }
}

/// Truncates and drops the `expired` days of history, with their jobs' events. Returns how many
/// jobs they held. A day whose lock was not granted in time is left to the next prune; a day
/// truncated but not dropped is dropped by a later one.
fn drop_expired_days(expired: Vec<(String,)>, by: By) -> spi::Result<i32> {
    let mut pruned = 0i32;
    for (day,) in expired {
        let count = db::read_only_rows::<(i64,)>(&format!("SELECT pg_catalog.count(*) FROM {day}"), &[])?
            .pop()
            .map_or(0, |(n,)| n);
        let events = format!("DELETE FROM jq_job_events e USING {day} h WHERE e.job_id = h.id");
        // The day was chosen in a snapshot from before its lock: a job enqueued since may depend on
        // one of its jobs. Once the lock is held, no other can, and the guard looks again.
        let lock = format!("LOCK TABLE {day} IN ACCESS EXCLUSIVE MODE");
        let guard = DAY_DEPENDED_ON.replace("$day", &day);
        let statements = [lock.as_str(), &guard, &events, &format!("TRUNCATE {day}")];
        match ddl(&statements, by.lock_timeout(TRUNCATE_LOCK_TIMEOUT)) {
            Ok(()) => pruned = pruned.saturating_add(i32::try_from(count).unwrap_or(i32::MAX)),
            Err(why) => {
                debug1!("pg_jobqueue: day {day} of history is not truncated yet: {why}");
                continue;
            }
        }
        if let Err(why) = ddl(&[&format!("DROP TABLE {day}")], by.lock_timeout(DROP_LOCK_TIMEOUT)) {
            debug1!("pg_jobqueue: day {day} of history is empty, and dropped by a later prune: {why}");
        }
    }
    Ok(pruned)
}

/// Runs `statements` in one subtransaction with `lock_timeout` set for them: all of them, or, on
/// any error, none. A statement that starts with `-- guard` stops the ones after it when it returns
/// a row (only locks may come before one). The caller's own lock_timeout is back in force afterwards.
fn ddl(statements: &[&str], lock_timeout: &str) -> Result<(), String> {
    const SET: &str = "SELECT pg_catalog.set_config('lock_timeout', $1, true)";
    let saved = db::read_only_rows::<(String,)>("SELECT pg_catalog.current_setting('lock_timeout')", &[])
        .map_err(|e| e.to_string())?
        .pop()
        .map_or_else(|| "0".to_owned(), |(s,)| s);
    let done = db::in_subtransaction(|| {
        db::rows_planned_per_call::<()>(SET, &[lock_timeout.into()])?;
        for statement in statements {
            let rows = db::rows_planned_per_call::<()>(statement, &[])?;
            if statement.starts_with("-- guard") && !rows.is_empty() {
                return Ok(Some(statement.lines().next().unwrap_or_default().to_owned()));
            }
        }
        Ok(None)
    });
    db::rows_planned_per_call::<()>(SET, &[saved.as_str().into()]).map_err(|e| e.to_string())?;
    match done? {
        Some(guard) => Err(format!("stopped by {guard}")),
        None => Ok(()),
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn prune_deletes_finished_jobs_past_their_queues_retention() {
        run("INSERT INTO jq_queues (queue_name, retention) VALUES ('short', '1 hour'), ('forever', NULL)");
        for queue in ["short", "forever", "default"] {
            run(&format!("SELECT jq_enqueue_batch('{queue}', array_fill('{{}}'::jsonb, ARRAY[2]))"));
            for _ in 0..2 {
                let (id, token) = claim(queue, "w", "30 s").unwrap();
                assert!(complete(id, "w", token));
            }
        }
        make_dead("short", 1, "E");
        // Age the history: one job of each queue finished 2 hours ago, the other 8 days ago.
        run("UPDATE jq_job_history SET finished_at = clock_timestamp() - interval '2 hours' WHERE id % 2 = 0");
        run("UPDATE jq_job_history SET finished_at = clock_timestamp() - interval '8 days' WHERE id % 2 = 1");
        run("UPDATE jq_live_jobs SET finished_at = clock_timestamp() - interval '8 days' WHERE status = 'dead'");
        assert_eq!(one::<i32>("SELECT jq_prune(max_jobs => 1)"), 1);
        assert_eq!(one::<i32>("SELECT jq_prune()"), 2);
        assert_eq!(one::<i32>("SELECT jq_prune()"), 0);
        assert!(one::<bool>(
            "SELECT count(*) FILTER (WHERE queue_name = 'short' AND status = 'succeeded') = 0
                AND count(*) FILTER (WHERE queue_name = 'forever') = 2
                AND count(*) FILTER (WHERE queue_name = 'default') = 1
                AND count(*) FILTER (WHERE status = 'dead') = 1
             FROM jq_jobs"
        ));
    }
}
