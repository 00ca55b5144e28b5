//! Workflows (guide, "Workflows"): jobs that wait for other jobs.
//!
//! A job enqueued with `depends_on` is pending but held (`awaiting` above 0, in neither claim index)
//! until every job it names has succeeded; the end of the last one makes it claimable. When one of
//! them ends dead or cancelled instead, the job is cancelled, DEPENDENCY_FAILED, and so on down the
//! chain.
//!
//! Hanging a job on another takes no lock on the other: the enqueue reads its dependencies' status
//! and writes rows of its own only (jq_job_dependencies, one per job and dependency), so nothing a
//! role does by naming another queue's jobs can hold up that queue's claims, heartbeats or
//! completions. Each row is counted once, when it turns `settled` (sql/queries/dependencies_settle.sql):
//! at the enqueue for a dependency that had already ended, else by the call that ends the dependency
//! (its completion, death, expiry or cancel) for up to `pg_jobqueue.dependents_per_job` rows per
//! job it ends, and by the reap pass for the rest (`settle_ended`): the rows beyond that number, those a call skipped
//! because another statement held them, and those of an enqueue still open when its dependency
//! ended, which that call could not see. So one completion costs the same with 30,000 dependents as
//! with a hundred (at most what the setting allows), and a job is never held for good by a race,
//! only until the next reap pass. A call that left rows wakes the database's
//! worker when it commits, for a pass then.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;

use super::settings;
use crate::db::{self, payload::Payload, status::Status, Session};
use crate::guc;
use crate::input;
use crate::rights::{self, Privilege};
use crate::shared::counters::{self, Counter};
use crate::shared::finish;
use crate::shared::front::{self, Key};
use crate::shared::{served, wake, xact};

// The jobs' queues, live or finished: the lookup a refused report already uses (src/api/lease.rs).
const OF: &str = include_str!("../../sql/queries/job_queues_any.sql");
const STATES: &str = include_str!("../../sql/queries/dependencies_states.sql");
const SUCCEEDED: &str = include_str!("../../sql/queries/dependencies_succeeded.sql");
const LINK: &str = include_str!("../../sql/queries/dependencies_link.sql");
const RELINK: &str = include_str!("../../sql/queries/dependencies_relink.sql");
const UNPART: &str = include_str!("../../sql/queries/dependencies_unpart.sql");
const SETTLE: &str = include_str!("../../sql/queries/dependencies_settle.sql");
const ENDED: &str = include_str!("../../sql/queries/dependencies_ended.sql");
const COUNT_PARTS: &str = include_str!("../../sql/queries/dependencies_count_parts.sql");
const COUNT_PART: &str = include_str!("../../sql/queries/dependencies_count_part.sql");
const RELEASE: &str = include_str!("../../sql/queries/dependencies_release.sql");
const RELEASE_ONE: &str = include_str!("../../sql/queries/dependencies_release_one.sql");
const CANCEL: &str = include_str!("../../sql/queries/dependencies_cancel.sql");
const AWAIT: &str = include_str!("../../sql/queries/dependencies_await.sql");
const PARENT_RESULTS: &str = include_str!("../../sql/queries/parent_results.sql");

/// The rights that let a caller name a job of a queue as a dependency: those that already let it
/// act on that queue's jobs. Never `monitor` (nor `enqueue`), which let a role read a queue's
/// figures (or put work in): hanging a job on another is a hold on what becomes of it.
const ACTORS: [Privilege; 2] = [Privilege::Consume, Privilege::Manage];

/// The rights that let a caller read a job's inputs and their results: `jq_result`'s.
const READERS: [Privilege; 3] = [Privilege::Enqueue, Privilege::Consume, Privilege::Manage];

thread_local! {
    /// Where this session's next reap pass goes on looking for ended dependencies (`settle_ended`):
    /// above this id. A backend is one thread.
    static LOOKED_UP_TO: Cell<i64> = const { Cell::new(0) };
}

/// Before an enqueue locks or writes anything: every id names a job of a queue the caller may act
/// on (consume or manage). A job of any other queue is answered exactly as one that does not exist
/// (22023), as every verb answers for a job of a queue the caller may not use: the refusal tells
/// nothing of other queues' jobs. Runs with the caller's rights for the check and the owner's for
/// the lookup.
pub(crate) fn check(depends_on: &[i64]) {
    let found: Vec<(i64, String)> = rights::as_owner(|| db::connect(|db| db.rows(OF, &[depends_on.to_vec().into()])))
        .expect("the dependencies' queues are readable");
    let role = rights::caller();
    let enforced = rights::enforced();
    let usable: HashSet<i64> = found
        .iter()
        .filter(|(_, queue_name)| {
            !enforced || ACTORS.iter().any(|privilege| rights::holds(role, queue_name, *privilege))
        })
        .map(|(id, _)| *id)
        .collect();
    if let Some(id) = depends_on.iter().find(|id| !usable.contains(id)) {
        crate::error::invalid_argument("depends_on", format_args!("names job {id}, which does not exist"));
    }
}

/// A job with more dependencies than this counts them in parts of its own (sql/schema/tables.sql,
/// jq_dependency_parts): the dependencies whose id is the part's number modulo PARTS. The SQL of
/// this module says 16 where it means this.
const PARTS: usize = 16;

/// What a job depending on `depends_on` waits for, now: the number that have not succeeded (for a
/// job counted in parts, the number of its parts that wait for any), what each part waits for
/// (empty for a job not counted in parts), which of them had already ended (`settled`, beside each
/// of `depends_on`), and one that ended dead or cancelled (or no longer exists), by which it is
/// cancelled at once.
pub(crate) struct Waits {
    pub awaiting: i32,
    parts: Vec<i32>,
    settled: Vec<bool>,
    pub failed: Option<i64>,
}

/// Reads the dependencies' status, taking no lock (see the module's comment), and counts what is
/// left to wait for. Runs with the owner's rights, before the job is inserted.
pub(crate) fn waits(db: &mut Session, depends_on: &[i64]) -> spi::Result<Waits> {
    let live = db.rows::<(i64, Status)>(STATES, &[depends_on.to_vec().into()])?;
    let mut awaited = HashSet::new();
    let mut parts = if parted(depends_on.len()) { vec![0; PARTS] } else { Vec::new() };
    let mut failed = None;
    for (id, status) in &live {
        if status.is("pending") || status.is("running") {
            awaited.insert(*id);
            if let Some(part) = parts.get_mut(part_of(*id) as usize) {
                *part += 1;
            }
        } else {
            failed = failed.or(Some(*id));
        }
    }
    let awaiting =
        if parts.is_empty() { awaited.len() as i32 } else { parts.iter().filter(|n| **n > 0).count() as i32 };
    // Sets, not scans of the rows: a job may name up to pg_jobqueue.max_batch_size dependencies.
    let live_ids: HashSet<i64> = live.iter().map(|(id, _)| *id).collect();
    let gone: Vec<i64> = depends_on.iter().copied().filter(|id| !live_ids.contains(id)).collect();
    if !gone.is_empty() {
        let succeeded: HashSet<i64> =
            db.rows::<(i64,)>(SUCCEEDED, &[gone.clone().into()])?.into_iter().map(|(id,)| id).collect();
        failed = failed.or_else(|| gone.iter().copied().find(|id| !succeeded.contains(id)));
    }
    let settled = depends_on.iter().map(|id| !awaited.contains(id)).collect();
    Ok(Waits { awaiting, parts, settled, failed })
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
    let args =
        [job_ids.to_vec().into(), depends_on.to_vec().into(), waits.parts.clone().into(), waits.settled.clone().into()];
    db.rows::<()>(LINK, &args)?;
    if let Some(cause) = waits.failed {
        cancel(db, job_ids.to_vec(), vec![cause; job_ids.len()], now)?;
    }
    Ok(())
}

/// How many rows of jq_job_dependencies a call settles itself for `jobs` jobs it ended
/// (`pg_jobqueue.dependents_per_job` each); the reap pass settles the rest.
fn per_call(jobs: usize) -> i32 {
    i32::try_from(jobs).unwrap_or(i32::MAX).saturating_mul(guc::DEPENDENTS_PER_JOB.get())
}

/// A row of jq_job_dependencies just settled: the waiting job, the job it waited on, and whether
/// the waiting job counts in parts.
type Settled = (i64, i64, bool);

/// Settles up to `most` rows waiting on `ended` (sql/queries/dependencies_settle.sql), and deletes
/// the rows `unlinked` (pairwise: a job that just succeeded and one of its own dependencies).
fn settle(db: &mut Session, ended: &[i64], most: i32, unlinked: (Vec<i64>, Vec<i64>)) -> spi::Result<Vec<Settled>> {
    db.rows::<Settled>(SETTLE, &[ended.to_vec().into(), most.into(), unlinked.0.into(), unlinked.1.into()])
}

/// A call that settled as many rows as it may (`most`) may have left more: the database's worker is
/// woken once the call's transaction commits, to settle them then rather than at its next pass.
fn leave_the_rest(settled: usize, most: i32, ended: &[i64]) {
    if !ended.is_empty() && settled >= most.max(0) as usize {
        xact::at_commit(served::wake_worker);
    }
}

/// Jobs succeeded (a completion): the rows of those that had dependencies in jq_job_dependencies
/// (`links`: pairwise, such a job and one of its dependencies) and jq_dependency_parts (`parted`:
/// those that had more than PARTS) go, as they leave jq_live_jobs; up to `dependents_per_job`
/// rows waiting on `awaited` (those with unsettled dependents) are settled, their jobs wait for one
/// fewer, and those that now wait for none are claimable once this commits.
///
/// In small statements, each run only when needed, rather than one that does it all: a completion
/// in the middle of a workflow runs two, whose plans are cheap to start, where one statement with
/// every case in it cost more to start than all of its work.
pub(crate) fn succeeded(
    db: &mut Session,
    awaited: Vec<i64>,
    links: (Vec<i64>, Vec<i64>),
    parted: Vec<i64>,
    now: TimestampWithTimeZone,
) -> spi::Result<()> {
    if !parted.is_empty() {
        db.rows::<()>(UNPART, &[parted.into()])?;
    }
    let most = per_call(awaited.len());
    let settled = settle(db, &awaited, most, links)?;
    leave_the_rest(settled.len(), most, &awaited);
    count_down(db, settled, now)
}

/// Each waiting job of `settled` waits for one fewer dependency (or part); those that wait for none
/// are claimable once this commits.
fn count_down(db: &mut Session, settled: Vec<Settled>, now: TimestampWithTimeZone) -> spi::Result<()> {
    // Per waiting job, what it counts down: dependencies, or parts that reach 0.
    let mut done: BTreeMap<i64, i32> = BTreeMap::new();
    let mut parts: BTreeMap<(i64, i32), i32> = BTreeMap::new();
    for (job_id, depends_on, parted) in settled {
        if parted {
            *parts.entry((job_id, part_of(depends_on))).or_default() += 1;
        } else {
            *done.entry(job_id).or_default() += 1;
        }
    }
    let emptied = match parts.len() {
        0 => Vec::new(),
        1 => {
            let ((job_id, part), count) = parts.pop_first().expect("one part");
            db.rows::<(i64, bool)>(COUNT_PART, &[job_id.into(), part.into(), count.into()])?
        }
        _ => {
            let (keys, counts): (Vec<(i64, i32)>, Vec<i32>) = parts.into_iter().unzip();
            let (jobs, parts): (Vec<i64>, Vec<i32>) = keys.into_iter().unzip();
            db.rows::<(i64, bool)>(COUNT_PARTS, &[jobs.into(), parts.into(), counts.into()])?
        }
    };
    for (job_id, _) in emptied.into_iter().filter(|(_, emptied)| *emptied) {
        *done.entry(job_id).or_default() += 1;
    }
    if done.is_empty() {
        return Ok(());
    }
    // Each with its queue's number, whose name the session keeps: a look-up of jq_queue_ids per
    // row cost a fan-out's release more than the rest of its RETURNING.
    type Released = (i64, i32, bool, i32, TimestampWithTimeZone, bool, bool);
    let released = if done.len() == 1 {
        let (job_id, count) = done.pop_first().expect("one job");
        db.rows::<Released>(RELEASE_ONE, &[job_id.into(), count.into(), now.into()])?
    } else {
        let (jobs, counts): (Vec<i64>, Vec<i32>) = done.into_iter().unzip();
        db.rows::<Released>(RELEASE, &[jobs.into(), counts.into(), now.into()])?
    };
    // Per queue: the first of the jobs released in claim order, whether one of them has an
    // ordering key, and whether one has a concurrency key.
    let mut queues: BTreeMap<i32, (Option<Key>, bool, bool)> = BTreeMap::new();
    for (id, queue_id, released, priority, available_at, ordered, keyed) in released {
        if released {
            let queue = queues.entry(queue_id).or_default();
            if keyed {
                queue.2 = true;
            } else {
                let key = Key { priority, available_at: available_at.into(), id };
                queue.0 = Some(queue.0.map_or(key, |first| first.min(key)));
                queue.1 |= ordered;
            }
        }
    }
    for (queue_id, (first, ordered, keyed)) in queues {
        made_claimable(&settings::queue_name(queue_id)?, first, ordered, keyed)?;
    }
    Ok(())
}

/// The part of a job counted in parts that a dependency's id falls in.
fn part_of(depends_on: i64) -> i32 {
    depends_on.rem_euclid(PARTS as i64) as i32
}

/// Whether a job depending on this many jobs counts them in parts.
pub(crate) fn parted(dependencies: usize) -> bool {
    dependencies > PARTS
}

/// Jobs of the queue became claimable (`first`, the first of those without a concurrency key in
/// claim order; `keyed`: some with one): claims are told as an enqueue tells them (the claim front,
/// the key rotation, waiting claims and LISTEN clients), once this commits. Once per queue, however
/// many jobs one completion released.
fn made_claimable(queue_name: &str, first: Option<Key>, ordered: bool, keyed: bool) -> spi::Result<()> {
    if keyed {
        super::keys::enqueued_keyed(queue_name);
    }
    if let Some(first) = first {
        front::lower_at_commit(queue_name, first, ordered);
    }
    wake::after_enqueue(queue_name, settings::of(queue_name)?.notify);
    Ok(())
}

/// The jobs `ended` ended dead or cancelled (of jobs that have unsettled dependents): each pending
/// job that depends on one of them is cancelled, DEPENDENCY_FAILED, and so on down, round by round,
/// up to `dependents_per_job` rows per job of `ended` in all; the reap pass goes on from there.
pub(crate) fn ended(db: &mut Session, ended: Vec<i64>, now: TimestampWithTimeZone) -> spi::Result<()> {
    let most = per_call(ended.len());
    let settled = cancel_down(db, ended.clone(), most, now)?;
    leave_the_rest(settled as usize, most, &ended);
    Ok(())
}

/// Settles up to `most` rows waiting on `round`, cancels their jobs, and goes on from those cancelled
/// that have dependents of their own. Each round settles in a fresh snapshot, after the cancels
/// before it. Returns how many rows it settled.
fn cancel_down(db: &mut Session, mut round: Vec<i64>, most: i32, now: TimestampWithTimeZone) -> spi::Result<i32> {
    let mut left = most;
    while !round.is_empty() && left > 0 {
        let settled = settle(db, &round, left, (Vec::new(), Vec::new()))?;
        if settled.is_empty() {
            break;
        }
        left -= settled.len() as i32;
        let (jobs, causes): (Vec<i64>, Vec<i64>) = settled.into_iter().map(|(job, on, _)| (job, on)).unzip();
        round = cancel(db, jobs, causes, now)?;
    }
    Ok(most - left)
}

/// Cancels each of `jobs` still pending, by the dependency beside it in `causes`; returns those of
/// them that have unsettled dependents of their own.
fn cancel(db: &mut Session, jobs: Vec<i64>, causes: Vec<i64>, now: TimestampWithTimeZone) -> spi::Result<Vec<i64>> {
    let cancelled = db.rows::<(i64, String, bool)>(CANCEL, &[jobs.into(), causes.into(), now.into()])?;
    let ids: Vec<i64> = cancelled.iter().map(|(id, _, _)| *id).collect();
    for (_, queue_name, _) in &cancelled {
        counters::count(queue_name, Counter::Cancellations);
    }
    finish::at_commit(&ids);
    Ok(cancelled.into_iter().filter(|(_, _, dependents)| *dependents).map(|(id, _, _)| id).collect())
}

/// The reap pass's share (sql/queries/dependencies_ended.sql): looks at up to `most` jobs that rows
/// of jq_job_dependencies still wait on, from where this session's last pass stopped, and settles up
/// to `most` rows of those that have ended, as their own end would have. Returns how many rows it
/// settled. Expects the owner's rights.
pub(crate) fn settle_ended(most: i32, now: TimestampWithTimeZone) -> spi::Result<i32> {
    db::connect(|db| {
        let from = LOOKED_UP_TO.get();
        let found = db.rows::<(i64, bool, bool, i32)>(ENDED, &[most.into(), from.into()])?;
        let looked = found.first().map_or(0, |row| row.3);
        let last = found.iter().map(|row| row.0).max().unwrap_or(0);
        let succeeded: Vec<i64> = found.iter().filter(|row| row.1 && row.2).map(|row| row.0).collect();
        let failed: Vec<i64> = found.iter().filter(|row| row.1 && !row.2).map(|row| row.0).collect();
        let mut left = most;
        if !succeeded.is_empty() {
            let settled = settle(db, &succeeded, left, (Vec::new(), Vec::new()))?;
            left -= settled.len() as i32;
            count_down(db, settled, now)?;
        }
        if !failed.is_empty() && left > 0 {
            left -= cancel_down(db, failed, left, now)?;
        }
        // Fewer looked at than asked: the end was reached, and the next pass starts again from the
        // first. All the rows asked settled: there may be more of those looked at, so the next pass
        // looks at them again.
        if left > 0 {
            LOOKED_UP_TO.set(if looked < most { 0 } else { last });
        }
        Ok(most - left)
    })
}

/// A job re-driven (jq_retry) that has dependencies waits again for those that have not succeeded,
/// counted as an enqueue counts them; one of them dead or cancelled cancels it again. Its rows of
/// jq_job_dependencies are settled again to match, before its count: a dependency's end that is
/// being counted right now (its row locked) is waited for, and one that ends later counts the job
/// down (sql/queries/dependencies_relink.sql).
pub(crate) fn redriven(
    db: &mut Session,
    job_id: i64,
    depends_on: &[i64],
    now: TimestampWithTimeZone,
) -> spi::Result<()> {
    let waits = waits(db, depends_on)?;
    db.rows::<()>(RELINK, &[job_id.into(), depends_on.to_vec().into(), waits.settled.clone().into()])?;
    db.rows::<(i64,)>(AWAIT, &[job_id.into(), waits.awaiting.into(), waits.parts.clone().into()])?;
    if let Some(cause) = waits.failed {
        cancel(db, vec![job_id], vec![cause], now)?;
    }
    Ok(())
}

/// The status and result of each job that `job_id` depends on, in the order it named them, for
/// whoever may read the job's results (enqueue, consume or manage on its queue, as `jq_result`;
/// guide, "Workflows"): what a merge step reads without knowing its inputs' queues. A job of a
/// queue the caller may not read is answered as a job that does not exist (no rows), and a parent
/// of such a queue is left out.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_parent_results(
    job_id: Option<i64>,
) -> spi::Result<TableIterator<'static, (name!(job_id, i64), name!(status, Status), name!(result, Option<Payload>))>> {
    let job_id = input::job_id(job_id);
    if rights::usable_jobs(&[job_id], &READERS).is_some_and(|usable| usable.is_empty()) {
        return Ok(TableIterator::new(Vec::new()));
    }
    let mut rows = rights::as_owner(|| {
        db::connect(|db| db.rows::<(i64, Status, Option<Payload>)>(PARENT_RESULTS, &[job_id.into()]))
    })?;
    // A parent of a queue whose results the caller may not read is left out, as one no longer kept.
    let parents: Vec<i64> = rows.iter().map(|(id, _, _)| *id).collect();
    if !parents.is_empty() {
        if let Some(usable) = rights::usable_jobs(&parents, &READERS) {
            let usable: HashSet<i64> = usable.into_iter().map(|(id, _)| id).collect();
            rows.retain(|(id, _, _)| usable.contains(id));
        }
    }
    Ok(TableIterator::new(rows))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    fn enqueue_after(queue: &str, depends_on: &[i64]) -> i64 {
        one::<i64>(&format!("SELECT jq_enqueue('{queue}', '{{}}', depends_on => ARRAY{depends_on:?}::bigint[])"))
    }

    fn awaiting(id: i64) -> i32 {
        one::<i32>(&format!("SELECT awaiting FROM jq_jobs WHERE id = {id}"))
    }

    fn error(id: i64) -> String {
        one::<String>(&format!(
            "SELECT concat_ws(': ', last_error_code, last_error_message) FROM jq_jobs WHERE id = {id}"
        ))
    }

    /// Claims and completes the one claimable job of `queue`, which must be `id`.
    fn run_job(queue: &str, id: i64) {
        let (claimed, token) = claim(queue, "w", "30 s").unwrap_or_else(|| panic!("job {id} is not claimable"));
        assert_eq!(claimed, id, "the claim took another job than {id}");
        assert!(complete(id, "w", token));
    }

    #[pg_test]
    fn a_job_is_held_until_its_last_dependency_succeeds() {
        let a = enqueue("fetch");
        let b = enqueue("fetch");
        let merge = enqueue_after("merge", &[a, b]);
        assert_eq!((status(merge), awaiting(merge)), ("pending".into(), 2));
        assert_eq!(claim("merge", "w", "30 s"), None, "held, not claimable");
        run_job("fetch", a);
        assert_eq!(awaiting(merge), 1);
        assert_eq!(claim("merge", "w", "30 s"), None, "one dependency left");
        run_job("fetch", b);
        assert_eq!(awaiting(merge), 0);
        run_job("merge", merge);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_job_dependencies"), 0, "its rows went with it");
    }

    #[pg_test]
    fn a_diamond_runs_each_job_once_and_in_order() {
        let top = enqueue("d");
        let left = enqueue_after("d", &[top]);
        let right = enqueue_after("d", &[top]);
        let bottom = enqueue_after("d", &[left, right]);
        run_job("d", top);
        let (x, tx) = claim("d", "w", "30 s").unwrap();
        let (y, ty) = claim("d", "w", "30 s").unwrap();
        assert_eq!([x.min(y), x.max(y)], [left, right]);
        assert_eq!(claim("d", "w", "30 s"), None, "the bottom waits for both sides");
        assert!(complete(x, "w", tx));
        assert_eq!(claim("d", "w", "30 s"), None);
        assert!(complete(y, "w", ty));
        run_job("d", bottom);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_jobs WHERE status = 'succeeded' AND attempt_count = 1"), 4);
    }

    #[pg_test]
    fn a_death_cancels_the_chain_below_it_with_events_naming_the_dependency() {
        let head = one::<i64>("SELECT jq_enqueue('c', '{}', max_attempts => 1)");
        let second = enqueue_after("c", &[head]);
        let third = enqueue_after("c", &[second]);
        let (id, token) = claim("c", "w", "30 s").unwrap();
        assert_eq!(id, head);
        assert!(fail(id, "w", token));
        assert_eq!(status(head), "dead");
        assert_eq!((awaiting(second), awaiting(third)), (0, 0), "a cancelled job waits for nothing");
        assert_eq!(
            (status(second), error(second)),
            ("cancelled".into(), format!("DEPENDENCY_FAILED: depends on job {head}, which ended dead"))
        );
        assert_eq!(
            (status(third), error(third)),
            ("cancelled".into(), format!("DEPENDENCY_FAILED: depends on job {second}, which ended cancelled"))
        );
        assert_eq!(
            one::<String>(&format!(
                "SELECT string_agg(concat_ws('/', job_id, event, status, error_code), ' ' ORDER BY id)
                 FROM jq_job_events WHERE job_id IN ({second}, {third})"
            )),
            format!("{second}/cancelled/cancelled/DEPENDENCY_FAILED {third}/cancelled/cancelled/DEPENDENCY_FAILED")
        );
    }

    #[pg_test]
    fn a_cancel_or_an_expiry_cancels_the_dependents() {
        let cancelled = enqueue("x");
        let child = enqueue_after("x", &[cancelled]);
        assert!(one::<bool>(&format!("SELECT jq_cancel({cancelled})")));
        assert_eq!(error(child), format!("DEPENDENCY_FAILED: depends on job {cancelled}, which ended cancelled"));
        let expiring = one::<i64>("SELECT jq_enqueue('y', '{}', expires_at => clock_timestamp() + interval '10 ms')");
        let waiting = enqueue_after("y", &[expiring]);
        sleep(0.05);
        run("SELECT jq_reap()");
        assert_eq!(status(expiring), "cancelled");
        assert_eq!(error(waiting), format!("DEPENDENCY_FAILED: depends on job {expiring}, which ended expired"));
    }

    #[pg_test]
    fn a_lease_that_runs_out_of_attempts_cancels_the_dependents() {
        let parent = one::<i64>("SELECT jq_enqueue('r', '{}', max_attempts => 1)");
        let child = enqueue_after("r", &[parent]);
        claim("r", "w", "10 ms").unwrap();
        sleep(0.05);
        run("SELECT jq_reap()");
        assert_eq!(status(parent), "dead");
        assert_eq!(error(child), format!("DEPENDENCY_FAILED: depends on job {parent}, which ended dead"));
    }

    #[pg_test]
    fn a_dependency_already_succeeded_is_satisfied_and_one_already_failed_cancels_at_once() {
        let done = enqueue("s");
        run_job("s", done);
        let ready = enqueue_after("s", &[done]);
        assert_eq!((status(ready), awaiting(ready)), ("pending".into(), 0));
        run_job("s", ready);
        let dead = make_dead("s", 1, "E")[0];
        let doomed = enqueue_after("s", &[done, dead]);
        assert_eq!(
            (status(doomed), error(doomed)),
            ("cancelled".into(), format!("DEPENDENCY_FAILED: depends on job {dead}, which ended dead"))
        );
        assert_eq!(claim("s", "w", "30 s"), None);
    }

    #[pg_test]
    fn a_dependency_that_fails_and_then_succeeds_on_retry_releases_its_dependent() {
        let parent = enqueue("f");
        let child = enqueue_after("f", &[parent]);
        let (id, token) = claim("f", "w", "30 s").unwrap();
        assert!(one::<bool>(&format!("SELECT jq_fail({id}, 'w', {token}, 'FLAKY', retry_in => interval '0 s')")));
        assert_eq!((status(child), awaiting(child)), ("pending".into(), 1), "a retry is no failure of the dependency");
        run_job("f", parent);
        run_job("f", child);
    }

    #[pg_test]
    fn a_redriven_child_waits_again_for_what_has_not_succeeded() {
        let parent = one::<i64>("SELECT jq_enqueue('t', '{}', max_attempts => 1)");
        let other = enqueue("t2");
        let child = enqueue_after("t", &[parent, other]);
        let (id, token) = claim("t", "w", "30 s").unwrap();
        assert!(fail(id, "w", token));
        assert_eq!(status(child), "cancelled");
        // Re-driven while its dependency is still dead: cancelled again at once.
        assert!(one::<bool>(&format!("SELECT jq_retry({child})")));
        assert_eq!(error(child), format!("DEPENDENCY_FAILED: depends on job {parent}, which ended dead"));
        // The dependency re-driven first, then the child: it waits for both again.
        assert!(one::<bool>(&format!("SELECT jq_retry({parent})")));
        assert!(one::<bool>(&format!("SELECT jq_retry({child})")));
        assert_eq!((status(child), awaiting(child)), ("pending".into(), 2));
        run_job("t2", other);
        let (id, token) = claim("t", "w", "30 s").unwrap();
        assert_eq!(id, parent, "the child still waits");
        assert!(complete(parent, "w", token));
        run_job("t", child);
    }

    #[pg_test]
    fn a_fan_in_of_ten_thousand_dependencies_releases_once() {
        run("SET LOCAL pg_jobqueue.max_batch_size = 10000");
        let parents: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT jq_enqueue_batch('in', array_fill('{}'::jsonb, ARRAY[10000]))", None, &[])
                .unwrap()
                .map(|row| row.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        let merge = enqueue_after("merge", &parents);
        assert_eq!(awaiting(merge), 10000);
        for _ in 0..10 {
            run("SELECT count(*)
                 FROM (SELECT array_agg(id ORDER BY id) AS ids, array_agg(lease_token ORDER BY id) AS tokens
                       FROM jq_claim('in', 'w', batch_size => 1000)) AS c,
                      jq_complete_batch(c.ids, 'w', c.tokens)");
        }
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_jobs WHERE queue_name = 'in' AND status = 'succeeded'"), 10000);
        assert_eq!(awaiting(merge), 0);
        run_job("merge", merge);
        assert_eq!(
            one::<i64>(&format!("SELECT count(*) FROM jq_parent_results({merge}) WHERE status = 'succeeded'")),
            10000
        );
    }

    fn enqueue_many(queue: &str, n: usize, max_attempts: i32) -> Vec<i64> {
        (0..n)
            .map(|_| one::<i64>(&format!("SELECT jq_enqueue('{queue}', '{{}}', max_attempts => {max_attempts})")))
            .collect()
    }

    /// The job's row count (its parts not yet at 0) and each part's, part 0 first.
    fn parts(id: i64) -> (i32, String) {
        (
            one::<i32>(&format!("SELECT awaiting FROM jq_live_jobs WHERE id = {id}")),
            one::<String>(&format!(
                "SELECT coalesce(string_agg(awaiting::text, ',' ORDER BY part), '') FROM jq_dependency_parts WHERE job_id = {id}"
            )),
        )
    }

    #[pg_test]
    fn a_fan_in_of_more_than_sixteen_counts_in_parts() {
        let parents = enqueue_many("in", 40, 5);
        let merge = enqueue_after("merge", &parents);
        // Of 40 consecutive ids, 8 parts hold 3 and 8 hold 2; part 0 holds the ids divisible by 16.
        let expected: Vec<String> =
            (0..16i64).map(|p| parents.iter().filter(|id| *id % 16 == p).count().to_string()).collect();
        assert_eq!(parts(merge), (16, expected.join(",")));
        assert_eq!(awaiting(merge), 40, "jq_jobs shows the dependencies it waits for");
        for (done, parent) in parents.iter().enumerate() {
            assert_eq!(claim("merge", "w", "30 s"), None, "held after {done} of 40");
            run_job("in", *parent);
            assert_eq!(awaiting(merge), 39 - done as i32);
        }
        assert_eq!(parts(merge), (0, vec!["0"; 16].join(",")));
        run_job("merge", merge);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_dependency_parts"), 0, "its parts went with it");
    }

    #[pg_test]
    fn a_fan_in_counted_in_parts_is_counted_again_when_redriven() {
        let parents = enqueue_many("rp", 20, 1);
        let merge = enqueue_after("rm", &parents);
        for parent in &parents[..5] {
            run_job("rp", *parent);
        }
        let (id, token) = claim("rp", "w", "30 s").unwrap();
        assert_eq!(id, parents[5]);
        assert!(fail(id, "w", token));
        assert_eq!((status(merge), awaiting(merge)), ("cancelled".into(), 0));
        // Completions after the cancel count down parts of a job that waits for nothing.
        for parent in &parents[6..8] {
            run_job("rp", *parent);
        }
        assert!(one::<bool>(&format!("SELECT jq_retry({})", parents[5])));
        assert!(one::<bool>(&format!("SELECT jq_retry({merge})")));
        assert_eq!((status(merge), awaiting(merge)), ("pending".into(), 13));
        let expected: Vec<String> = (0..16i64)
            .map(|p| parents[5..].iter().filter(|id| **id % 16 == p && !parents[6..8].contains(id)).count().to_string())
            .collect();
        assert_eq!(parts(merge), (expected.iter().filter(|n| *n != "0").count() as i32, expected.join(",")));
        for _ in 0..13 {
            let (id, token) = claim("rp", "w", "30 s").unwrap();
            assert_eq!(claim("rm", "w", "30 s"), None);
            assert!(complete(id, "w", token));
        }
        run_job("rm", merge);
    }

    #[pg_test]
    fn a_pruned_or_purged_fan_in_takes_its_parts() {
        let parents = enqueue_many("pp", 17, 1);
        let cancelled = enqueue_after("pc", &parents);
        let dead = enqueue_after("pd", &parents);
        run(&format!("UPDATE jq_live_jobs SET max_attempts = 1 WHERE id = {dead}"));
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_dependency_parts"), 32);
        assert!(one::<bool>(&format!("SELECT jq_cancel({cancelled})")));
        run("UPDATE jq_live_jobs SET finished_at = clock_timestamp() - interval '30 days' WHERE status = 'cancelled'");
        run("SELECT jq_prune()");
        assert_eq!(one::<i64>(&format!("SELECT count(*) FROM jq_dependency_parts WHERE job_id = {cancelled}")), 0);
        for parent in &parents {
            run_job("pp", *parent);
        }
        let (id, token) = claim("pd", "w", "30 s").unwrap();
        assert_eq!(id, dead);
        assert!(fail(id, "w", token));
        assert_eq!(one::<i32>("SELECT jq_purge_dead('pd')"), 1);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_dependency_parts"), 0);
    }

    #[pg_test]
    fn a_fan_out_of_ten_thousand_dependents_is_released_by_its_completion_and_the_reap_pass() {
        run("SET LOCAL pg_jobqueue.max_batch_size = 10000");
        let parent = enqueue("out");
        run(&format!(
            "SELECT count(*) FROM jq_enqueue_batch('out2', array_fill('{{}}'::jsonb, ARRAY[10000]), depends_on => ARRAY[{parent}]::bigint[])"
        ));
        assert_eq!(one::<i64>("SELECT held_by_dependency FROM jq_queue_stats WHERE queue_name = 'out2'"), 10000);
        assert_eq!(one::<i64>("SELECT pending FROM jq_queue_stats WHERE queue_name = 'out2'"), 0);
        run_job("out", parent);
        // The completion released pg_jobqueue.dependents_per_job of them (100) itself.
        assert_eq!(one::<i64>("SELECT pending FROM jq_queue_stats WHERE queue_name = 'out2'"), 100);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_job_dependencies WHERE NOT settled"), 9900);
        run("SELECT jq_reap()");
        assert_eq!(one::<i64>("SELECT held_by_dependency FROM jq_queue_stats WHERE queue_name = 'out2'"), 0);
        assert_eq!(one::<i64>("SELECT pending FROM jq_queue_stats WHERE queue_name = 'out2'"), 10000);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_claim('out2', 'w', batch_size => 1000)"), 1000);
    }

    #[pg_test]
    fn a_failure_cancels_down_a_chain_by_the_call_and_then_the_reap_pass() {
        run("SET LOCAL pg_jobqueue.dependents_per_job = 3");
        let head = one::<i64>("SELECT jq_enqueue('ch', '{}', max_attempts => 1)");
        let mut chain = vec![head];
        for _ in 0..10 {
            chain.push(enqueue_after("ch", &[*chain.last().unwrap()]));
        }
        let (id, token) = claim("ch", "w", "30 s").unwrap();
        assert!(fail(id, "w", token));
        let cancelled = || one::<i64>("SELECT count(*) FROM jq_jobs WHERE queue_name = 'ch' AND status = 'cancelled'");
        assert_eq!(cancelled(), 3, "three rows settled by the failure itself");
        run("SELECT jq_reap()");
        assert_eq!(cancelled(), 10);
        assert_eq!(error(chain[10]), format!("DEPENDENCY_FAILED: depends on job {}, which ended cancelled", chain[9]));
    }

    #[pg_test]
    fn with_no_dependents_per_job_the_reap_pass_releases_them_all() {
        run("SET LOCAL pg_jobqueue.dependents_per_job = 0");
        let parent = enqueue("z");
        let child = enqueue_after("z2", &[parent]);
        run_job("z", parent);
        assert_eq!((status(child), awaiting(child)), ("pending".into(), 1));
        assert_eq!(claim("z2", "w", "30 s"), None);
        run("SELECT jq_reap()");
        assert_eq!(awaiting(child), 0);
        run_job("z2", child);
    }

    #[pg_test]
    fn a_row_left_unsettled_by_a_race_is_settled_by_the_reap_pass() {
        // What an enqueue still open while its dependency ended leaves: a row the end did not see.
        let parent = enqueue("race");
        let child = enqueue_after("race2", &[parent]);
        run(&format!("DELETE FROM jq_job_dependencies WHERE depends_on = {parent}"));
        run_job("race", parent);
        run(&format!("INSERT INTO jq_job_dependencies (depends_on, job_id) VALUES ({parent}, {child})"));
        assert_eq!(awaiting(child), 1);
        run("SELECT jq_reap()");
        assert_eq!(awaiting(child), 0);
        run_job("race2", child);
        // And a dead one cancels.
        let dead = one::<i64>("SELECT jq_enqueue('race', '{}', max_attempts => 1)");
        let doomed = enqueue_after("race2", &[dead]);
        run(&format!("DELETE FROM jq_job_dependencies WHERE depends_on = {dead}"));
        let (id, token) = claim("race", "w", "30 s").unwrap();
        assert!(fail(id, "w", token));
        run(&format!("INSERT INTO jq_job_dependencies (depends_on, job_id) VALUES ({dead}, {doomed})"));
        assert_eq!(status(doomed), "pending");
        run("SELECT jq_reap()");
        assert_eq!(error(doomed), format!("DEPENDENCY_FAILED: depends on job {dead}, which ended dead"));
    }

    #[pg_test]
    fn parent_results_give_each_dependency_in_the_order_named() {
        let a = enqueue("p");
        let b = enqueue("p");
        let child = enqueue_after("p2", &[b, a]);
        let (id, token) = claim("p", "w", "30 s").unwrap();
        assert_eq!(id, a);
        assert!(one::<bool>(&format!("SELECT jq_complete({a}, 'w', {token}, '{{\"n\": 1}}')")));
        assert_eq!(
            one::<String>(&format!(
                "SELECT string_agg(concat_ws('/', job_id, status, result), ' ' ORDER BY ordinality)
                 FROM jq_parent_results({child}) WITH ORDINALITY"
            )),
            format!("{b}/pending {a}/succeeded/{{\"n\": 1}}")
        );
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_parent_results(999999999)"), 0);
    }

    #[pg_test]
    fn held_jobs_are_counted_in_the_figures_and_metrics() {
        let parent = enqueue("h");
        enqueue_after("h", &[parent]);
        assert_eq!(
            one::<String>("SELECT concat_ws('/', pending, scheduled, held_by_dependency) FROM jq_queue_stats WHERE queue_name = 'h'"),
            "1/0/1"
        );
        assert!(
            one::<String>("SELECT jq_metrics()").contains("jq_held_back_jobs{queue=\"h\",limit=\"dependency\"} 1\n")
        );
    }

    #[pg_test]
    fn a_batch_depends_as_one_job_does() {
        let parent = enqueue("b");
        run(&format!(
            "SELECT jq_enqueue_batch('b2', ARRAY['{{}}', '{{}}']::jsonb[], depends_on => ARRAY[{parent}]::bigint[])"
        ));
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_jobs WHERE queue_name = 'b2' AND awaiting = 1"), 2);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_job_dependencies"), 2);
        run_job("b", parent);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_claim('b2', 'w', batch_size => 10)"), 2);
    }

    #[pg_test]
    fn retention_keeps_a_job_that_a_pending_job_depends_on() {
        run("INSERT INTO jq_queues (queue_name, retention) VALUES ('old', '1 hour')");
        let kept = enqueue("old");
        let other = enqueue("other");
        let child = enqueue_after("new", &[kept, other]);
        run_job("old", kept);
        let gone = enqueue("old");
        run_job("old", gone);
        run("UPDATE jq_job_history SET finished_at = clock_timestamp() - interval '2 hours'");
        run("SELECT jq_prune()");
        assert_eq!(
            one::<String>("SELECT string_agg(id::text, ',') FROM jq_jobs WHERE queue_name = 'old'"),
            kept.to_string()
        );
        run_job("other", other);
        run_job("new", child);
        run("UPDATE jq_job_history SET finished_at = clock_timestamp() - interval '2 hours'");
        run("SELECT jq_prune()");
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_jobs WHERE queue_name = 'old'"), 0, "its dependent is final");
    }

    #[pg_test]
    fn a_queue_that_keeps_nothing_keeps_a_job_others_depend_on() {
        run("SELECT jq_configure('light', '{\"keep_succeeded\": false}')");
        let parent = enqueue("light");
        let alone = enqueue("light");
        let child = enqueue_after("heavy", &[parent]);
        run_job("light", parent);
        run_job("light", alone);
        assert_eq!(
            one::<String>("SELECT string_agg(id::text, ',') FROM jq_jobs WHERE queue_name = 'light'"),
            parent.to_string()
        );
        run_job("heavy", child);
    }
}
