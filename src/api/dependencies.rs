//! Workflows (guide, "Workflows"): jobs that wait for other jobs.
//!
//! A job enqueued with `depends_on` is pending but held (`awaiting` above 0, in neither claim index)
//! until every job it names has succeeded; the completion of the last one makes it claimable in the
//! same transaction. When one of them ends dead or cancelled instead, the job is cancelled,
//! DEPENDENCY_FAILED, and so on down the chain, in the same transaction as well.
//!
//! The races are settled by row locks. An enqueue marks each live dependency (`dependents`) with an
//! UPDATE, so it holds that row's lock until it commits: the dependency's completion, failure or
//! cancel waits for it, then sees the mark and the new job's rows in jq_job_dependencies (each
//! statement here takes a fresh snapshot in READ COMMITTED; in REPEATABLE READ the waiting update
//! fails with 40001 instead). Two dependencies completing at once both update the waiting job's
//! row, so the second counts down from what the first left.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;

use super::settings;
use crate::db::{self, payload::Payload, status::Status, Session};
use crate::input;
use crate::rights::{self, Privilege};
use crate::shared::counters::{self, Counter};
use crate::shared::finish;
use crate::shared::front::{self, Key};
use crate::shared::wake;

const OF: &str = include_str!("../../sql/queries/dependencies_of.sql");
const MARK: &str = include_str!("../../sql/queries/dependencies_mark.sql");
const SUCCEEDED: &str = include_str!("../../sql/queries/dependencies_succeeded.sql");
const LINK: &str = include_str!("../../sql/queries/dependencies_link.sql");
const RELEASE: &str = include_str!("../../sql/queries/dependencies_release.sql");
const WAITING: &str = include_str!("../../sql/queries/dependencies_waiting.sql");
const CANCEL: &str = include_str!("../../sql/queries/dependencies_cancel.sql");
const UNLINK: &str = include_str!("../../sql/queries/dependencies_unlink.sql");
const AWAIT: &str = include_str!("../../sql/queries/dependencies_await.sql");
const PARENT_RESULTS: &str = include_str!("../../sql/queries/parent_results.sql");

/// The rights that let a caller name a job of a queue as a dependency: at least `monitor`.
const SEERS: [Privilege; 4] = [Privilege::Monitor, Privilege::Manage, Privilege::Consume, Privilege::Enqueue];

/// Before an enqueue locks or writes anything: every id names a job, and the caller holds at least
/// `monitor` on each one's queue (42501 otherwise). Runs with the caller's rights for the check and
/// the owner's for the lookup.
pub(crate) fn check(depends_on: &[i64]) {
    let found: Vec<(i64, String)> = rights::as_owner(|| db::connect(|db| db.rows(OF, &[depends_on.to_vec().into()])))
        .expect("the dependencies' queues are readable");
    if let Some(id) = depends_on.iter().find(|id| !found.iter().any(|(f, _)| f == *id)) {
        crate::error::invalid_argument("depends_on", format_args!("names job {id}, which does not exist"));
    }
    if !rights::enforced() {
        return;
    }
    for (_, queue_name) in &found {
        if !SEERS.iter().any(|privilege| rights::holds(rights::caller(), queue_name, *privilege)) {
            crate::error::permission_denied(queue_name, "monitor");
        }
    }
}

/// What a job depending on `depends_on` waits for, now: the number that have not succeeded, and
/// one that ended dead or cancelled (or no longer exists), by which it is cancelled at once.
pub(crate) struct Waits {
    pub awaiting: i32,
    pub failed: Option<i64>,
}

/// Locks and marks the live dependencies (see the module's comment) and counts what is left to wait
/// for. Runs with the owner's rights, before the job is inserted.
pub(crate) fn waits(db: &mut Session, depends_on: &[i64]) -> spi::Result<Waits> {
    let live = db.rows::<(i64, Status, String)>(MARK, &[depends_on.to_vec().into()])?;
    let mut awaiting = 0;
    let mut failed = None;
    for (id, status, _) in &live {
        if status.is("pending") || status.is("running") {
            awaiting += 1;
        } else {
            failed = failed.or(Some(*id));
        }
    }
    let gone: Vec<i64> = depends_on.iter().copied().filter(|id| !live.iter().any(|(l, _, _)| l == id)).collect();
    if !gone.is_empty() {
        let succeeded = db.rows::<(i64,)>(SUCCEEDED, &[gone.clone().into()])?;
        failed = failed.or_else(|| gone.iter().copied().find(|id| !succeeded.iter().any(|(s,)| s == id)));
    }
    Ok(Waits { awaiting, failed })
}

/// After the insert of `job_ids`, each depending on `depends_on`: their rows in
/// jq_job_dependencies, and, when a dependency has already failed, their cancellation.
pub(crate) fn link(
    db: &mut Session,
    job_ids: &[i64],
    depends_on: &[i64],
    waits: &Waits,
    now: TimestampWithTimeZone,
) -> spi::Result<()> {
    db.rows::<()>(LINK, &[job_ids.to_vec().into(), depends_on.to_vec().into()])?;
    if let Some(cause) = waits.failed {
        cancel(db, job_ids.to_vec(), vec![cause; job_ids.len()], now)?;
    }
    Ok(())
}

/// The jobs `done` succeeded (a completion, of jobs that have dependents): those waiting on them
/// wait for one fewer, and those that now wait for none are claimable once this commits.
pub(crate) fn succeeded(db: &mut Session, done: Vec<i64>, now: TimestampWithTimeZone) -> spi::Result<()> {
    type Released = (i64, String, bool, i32, TimestampWithTimeZone, bool, bool);
    for (id, queue_name, released, priority, available_at, ordered, keyed) in
        db.rows::<Released>(RELEASE, &[done.into(), now.into()])?
    {
        if released {
            made_claimable(&queue_name, Key { priority, available_at: available_at.into(), id }, ordered, keyed)?;
        }
    }
    Ok(())
}

/// A job became claimable: claims are told as an enqueue tells them (the claim front, the key
/// rotation, waiting claims and LISTEN clients), once this commits.
fn made_claimable(queue_name: &str, key: Key, ordered: bool, keyed: bool) -> spi::Result<()> {
    if keyed {
        super::keys::enqueued_keyed(queue_name);
    } else {
        front::lower_at_commit(queue_name, key, ordered);
    }
    wake::after_enqueue(queue_name, settings::of(queue_name)?.notify);
    Ok(())
}

/// The jobs `ended` ended dead or cancelled (of jobs that have dependents): each pending job that
/// depends on one of them is cancelled, DEPENDENCY_FAILED, and so on down, round by round. Each
/// round reads in a fresh snapshot, after the update before it, which waited for any enqueue that
/// was marking those jobs, so a job enqueued meanwhile is found by the next round.
pub(crate) fn ended(db: &mut Session, ended: Vec<i64>, now: TimestampWithTimeZone) -> spi::Result<()> {
    let mut round = ended;
    while !round.is_empty() {
        let (jobs, causes): (Vec<i64>, Vec<i64>) = db.rows::<(i64, i64)>(WAITING, &[round.into()])?.into_iter().unzip();
        if jobs.is_empty() {
            break;
        }
        round = cancel(db, jobs, causes, now)?;
    }
    Ok(())
}

/// Cancels each of `jobs` still pending, by the dependency beside it in `causes`; returns those of
/// them that have dependents of their own.
fn cancel(db: &mut Session, jobs: Vec<i64>, causes: Vec<i64>, now: TimestampWithTimeZone) -> spi::Result<Vec<i64>> {
    let cancelled = db.rows::<(i64, String, bool)>(CANCEL, &[jobs.into(), causes.into(), now.into()])?;
    let ids: Vec<i64> = cancelled.iter().map(|(id, _, _)| *id).collect();
    for (_, queue_name, _) in &cancelled {
        counters::count(queue_name, Counter::Cancellations);
    }
    finish::at_commit(&ids);
    Ok(cancelled.into_iter().filter(|(_, _, dependents)| *dependents).map(|(id, _, _)| id).collect())
}

/// The jobs `job_ids` left jq_live_jobs (completed): their rows in jq_job_dependencies go, found by
/// `depends_on`, the union of what they depended on.
pub(crate) fn unlink(db: &mut Session, job_ids: Vec<i64>, depends_on: Vec<i64>) -> spi::Result<()> {
    db.rows::<()>(UNLINK, &[job_ids.into(), depends_on.into()])?;
    Ok(())
}

/// A job re-driven (jq_retry) that has dependencies waits again for those that have not succeeded,
/// counted as an enqueue counts them; one of them dead or cancelled cancels it again.
pub(crate) fn redriven(
    db: &mut Session,
    job_id: i64,
    depends_on: &[i64],
    now: TimestampWithTimeZone,
) -> spi::Result<()> {
    let waits = waits(db, depends_on)?;
    db.rows::<(i64,)>(AWAIT, &[job_id.into(), waits.awaiting.into()])?;
    if let Some(cause) = waits.failed {
        cancel(db, vec![job_id], vec![cause], now)?;
    }
    Ok(())
}

/// The status and result of each job that `job_id` depends on, in the order it named them, for
/// whoever may consume or monitor the job's queue (guide, "Workflows"): what a merge step reads
/// without knowing its inputs' queues. A job of a queue the caller may not see is answered as a job
/// that does not exist: no rows.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_parent_results(
    job_id: Option<i64>,
) -> spi::Result<TableIterator<'static, (name!(job_id, i64), name!(status, Status), name!(result, Option<Payload>))>> {
    let job_id = input::job_id(job_id);
    if rights::usable_jobs(&[job_id], &SEERS).is_some_and(|usable| usable.is_empty()) {
        return Ok(TableIterator::new(Vec::new()));
    }
    let rows = rights::as_owner(|| {
        db::connect(|db| db.rows::<(i64, Status, Option<Payload>)>(PARENT_RESULTS, &[job_id.into()]))
    })?;
    Ok(TableIterator::new(rows))
}
