//! The lease holder's verbs: jq_heartbeat, jq_complete, jq_fail. Each acts only while the job runs
//! under this worker's unexpired lease with this token; otherwise it changes nothing and returns false.
//!
//! The caller needs `consume` on the job's queue, checked before the verb touches the job
//! (`rights::usable_jobs`): a job of a queue it may not consume is answered as a job that does not
//! exist, false, and one that holds `consume` on no queue at all is refused with 42501. Superusers
//! and the owner hold every right, so their calls look nothing up.

use std::collections::HashSet;
use std::sync::LazyLock;

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use crate::api::{dependencies, held, settings};
use crate::db::text::without_sections;
use crate::db::{self, clock, payload::Payload, status::Status, Session};
use crate::input;
use crate::rights::{self, Privilege};
use crate::shared::counters::{self, Counter};
use crate::shared::finish;
use crate::shared::front::{self, Key};
use crate::shared::wake;

const HEARTBEAT: &str = include_str!("../../sql/queries/heartbeat.sql");
const COMPLETE: &str = include_str!("../../sql/queries/complete.sql");
const COMPLETE_BATCH: &str = include_str!("../../sql/queries/complete_batch.sql");
const COMPLETE_FORGET: &str = include_str!("../../sql/queries/complete_forget.sql");
const COMPLETE_BATCH_FORGET: &str = include_str!("../../sql/queries/complete_batch_forget.sql");

/// A completion statement: the whole of its file while some queue keeps no succeeded job, else
/// without its "keep nothing" sections (as complete.sql's header says).
fn completing(sql: &'static str, lean: &'static LazyLock<String>) -> spi::Result<&'static str> {
    Ok(if settings::any_keeps_nothing()? { sql } else { lean.as_str() })
}

/// The completion statements, each whole and lean, and the two that forget, for the plan tests.
#[cfg(any(test, feature = "pg_test"))]
pub(crate) fn completions() -> ([(&'static str, &'static str); 2], [&'static str; 2]) {
    (
        [(COMPLETE, COMPLETE_KEPT.as_str()), (COMPLETE_BATCH, COMPLETE_BATCH_KEPT.as_str())],
        [COMPLETE_FORGET, COMPLETE_BATCH_FORGET],
    )
}

static COMPLETE_KEPT: LazyLock<String> = LazyLock::new(|| without_sections(COMPLETE, "keep nothing"));
static COMPLETE_BATCH_KEPT: LazyLock<String> = LazyLock::new(|| without_sections(COMPLETE_BATCH, "keep nothing"));
const FAIL: &str = include_str!("../../sql/queries/fail.sql");

/// The privileges of the lease holder's verbs, for `rights::usable_jobs`.
pub(super) const CONSUMERS: [Privilege; 1] = [Privilege::Consume];

const JOBS_QUEUES: &str = include_str!("../../sql/queries/job_queues_any.sql");

/// Whether the caller may consume the job: false for a job of a queue it may not consume, which is
/// answered as an unknown job (see `rights::usable_jobs`).
pub(super) fn consumable(job_id: i64) -> bool {
    rights::usable_jobs(&[job_id], &CONSUMERS).is_none_or(|usable| !usable.is_empty())
}

/// Counts a refused call against its job's queue, live or finished (a second completion finds its
/// job in the history; a job that does not exist counts nowhere). Refusals are rare, so the lookup
/// costs the hot path nothing.
pub(super) fn count_refused(db: &mut Session, job_ids: Vec<i64>, counter: Counter) -> spi::Result<()> {
    for (_, queue_name) in db.rows::<(i64, String)>(JOBS_QUEUES, &[job_ids.into()])? {
        counters::count(&queue_name, counter);
    }
    Ok(())
}

/// Extends the lease to now + `extend` (default: the length it was claimed with), never past the
/// queue's maximum runtime counted from this attempt's claim.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_heartbeat(
    job_id: Option<i64>,
    worker: Option<&str>,
    lease_token: Option<i64>,
    extend: default!(Option<Interval>, "NULL"),
) -> spi::Result<bool> {
    let now = clock::now();
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let extend = input::lease_length("extend", extend, now);
    if !consumable(job_id) {
        return Ok(false);
    }
    rights::as_owner(|| {
        db::connect(|db| {
            let args = [job_id.into(), worker.into(), lease_token.into(), extend.into(), now.into(), "running".into()];
            let extended = super::tokens::lease_write(|| db.rows::<(String,)>(HEARTBEAT, &args))?;
            if extended.is_empty() {
                count_refused(db, vec![job_id], Counter::StaleHeartbeats)?;
                return Ok(false);
            }
            Ok(true)
        })
    })
}

/// Completes the job, keeping `result` with it in the history (guide, "Results and waiting").
// Its C symbol is new in 0.3.0, whose `result` 0.2.0's definition lacks: `upgrade::jq_complete`
// keeps the old one.
#[pg_extern(name = "jq_complete", volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_complete_job(
    job_id: Option<i64>,
    worker: Option<&str>,
    lease_token: Option<i64>,
    result: default!(Option<Payload>, "NULL"),
) -> spi::Result<bool> {
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let result = input::result("result", result);
    let now = clock::now();
    if !consumable(job_id) {
        return Ok(false);
    }
    rights::as_owner(|| {
        db::connect(|db| {
            let Some((queue_id, claimed_at, keyed, dependents, depends_on)) =
                complete_one(db, job_id, worker, lease_token, result, now)?
            else {
                count_refused(db, vec![job_id], Counter::StaleCompletions)?;
                return Ok(false);
            };
            count_completion(&settings::queue_name(queue_id)?, claimed_at, now, keyed);
            after_success(db, vec![(job_id, dependents, depends_on)], now)?;
            finish::at_commit(&[job_id]);
            Ok(true)
        })
    })
}

/// A completion's row: the queue's number, the claim time, whether the job had a concurrency key,
/// whether jobs depend on it, and what it depended on.
type Completed = (i32, TimestampWithTimeZone, bool, bool, Option<Vec<i64>>);

/// Whether the queue numbered `queue_id` (a job's, as `held` told) keeps its succeeded jobs. None
/// when the queue is not known, or while no queue keeps nothing: then every completion runs the
/// lean statement anyway, and needs no look at a queue's settings.
fn keeps(queue_id: Option<i32>) -> spi::Result<Option<bool>> {
    match queue_id {
        Some(queue_id) if settings::any_keeps_nothing()? => {
            Ok(Some(settings::of(&settings::queue_name(queue_id)?)?.keep_succeeded))
        }
        _ => Ok(None),
    }
}

/// Completes one job by the statement made for its queue when this session claimed it (`held`):
/// one that forgets it, or one that keeps it without looking at any queue's settings. Otherwise,
/// or when the forgetting statement completed nothing (a job others depend on is kept, and a
/// lease that no longer holds is refused), by the statement for every job.
fn complete_one(
    db: &mut Session,
    job_id: i64,
    worker: &str,
    lease_token: i64,
    result: Option<Payload>,
    now: TimestampWithTimeZone,
) -> spi::Result<Option<Completed>> {
    let queue_id = held::finishing(job_id);
    let keep = keeps(queue_id)?;
    if let (Some(queue_id), Some(false)) = (queue_id, keep) {
        let args = [job_id.into(), worker.into(), lease_token.into(), now.into(), queue_id.into(), "running".into()];
        if let Some(completed) = db.rows::<Completed>(COMPLETE_FORGET, &args)?.pop() {
            return Ok(Some(completed));
        }
    }
    let statement = match keep {
        Some(true) => COMPLETE_KEPT.as_str(),
        _ => completing(COMPLETE, &COMPLETE_KEPT)?,
    };
    let args = [job_id.into(), worker.into(), lease_token.into(), now.into(), result.into(), "running".into()];
    Ok(db.rows::<Completed>(statement, &args)?.pop())
}

/// Workflows (guide, "Workflows"), after jobs succeeded: the jobs waiting on those that have
/// dependents are counted down, and the rows of those that had dependencies go, in one statement.
/// Only for jobs that use them, so a completion outside workflows runs no statement more.
fn after_success(
    db: &mut Session,
    done: Vec<(i64, bool, Option<Vec<i64>>)>,
    now: TimestampWithTimeZone,
) -> spi::Result<()> {
    let awaited: Vec<i64> = done.iter().filter(|(_, dependents, _)| *dependents).map(|(id, _, _)| *id).collect();
    let waited: Vec<(i64, Vec<i64>)> =
        done.into_iter().filter_map(|(id, _, depends_on)| depends_on.map(|d| (id, d))).collect();
    if awaited.is_empty() && waited.is_empty() {
        return Ok(());
    }
    let parted: Vec<i64> = waited.iter().filter(|(_, on)| dependencies::parted(on.len())).map(|(id, _)| *id).collect();
    // Each job that had dependencies, once beside each of them: the keys of its rows.
    let links: (Vec<i64>, Vec<i64>) =
        waited.into_iter().flat_map(|(id, on)| on.into_iter().map(move |depends_on| (id, depends_on))).unzip();
    dependencies::succeeded(db, awaited, links, parted, now)
}

/// Counts a completion; one of a job with a concurrency key also frees a slot of its key, which
/// wakes the queue's waiting claims when the transaction commits (guide, "Flow control").
fn count_completion(queue_name: &str, claimed_at: TimestampWithTimeZone, now: TimestampWithTimeZone, keyed: bool) {
    counters::completed(queue_name, micros(now) - micros(claimed_at));
    if keyed {
        wake::at_commit(queue_name);
    }
}

fn micros(at: TimestampWithTimeZone) -> i64 {
    pg_sys::TimestampTz::from(at)
}

/// jq_complete for a batch, in one statement: `lease_tokens[i]` is the token of `job_ids[i]`, and
/// `results[i]` (if given) its result. Each job is completed under jq_complete's guard; returns the
/// ids it completed, in no particular order.
// A new C symbol, as for jq_complete.
#[pg_extern(name = "jq_complete_batch", volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_complete_jobs(
    job_ids: Option<Vec<Option<i64>>>,
    worker: Option<&str>,
    lease_tokens: Option<Vec<Option<i64>>>,
    results: default!(Option<Vec<Option<Payload>>>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> spi::Result<TableIterator<'static, (name!(id, i64),)>> {
    input::one_dimension(fcinfo, 0, "job_ids");
    input::one_dimension(fcinfo, 2, "lease_tokens");
    input::one_dimension(fcinfo, 3, "results");
    let (job_ids, lease_tokens) = input::job_batch(job_ids, lease_tokens);
    let worker = input::worker(worker);
    let results = input::results(results, &job_ids);
    let now = clock::now();
    // Only the jobs the caller may consume go into the statement, each with its token and result.
    let usable = rights::usable_jobs(&job_ids, &CONSUMERS);
    let given = Batch { ids: job_ids, tokens: lease_tokens, results };
    let given = match usable {
        None => given,
        Some(usable) => {
            let usable: HashSet<i64> = usable.into_iter().map(|(id, _)| id).collect();
            given.only(|id| usable.contains(&id))
        }
    };
    let ids = given.ids.clone();
    let completed = rights::as_owner(move || {
        db::connect(move |db| {
            if ids.is_empty() {
                return Ok(Vec::new());
            }
            let mut completed = Vec::new();
            let mut workflows = Vec::new();
            for (id, queue_id, claimed_at, keyed, dependents, depends_on) in complete_many(db, given, worker, now)? {
                count_completion(&settings::queue_name(queue_id)?, claimed_at, now, keyed);
                completed.push(id);
                if dependents || depends_on.is_some() {
                    workflows.push((id, dependents, depends_on));
                }
            }
            after_success(db, workflows, now)?;
            finish::at_commit(&completed);
            if completed.len() < ids.len() {
                let refused = ids.iter().copied().filter(|id| !completed.contains(id)).collect();
                count_refused(db, refused, Counter::StaleCompletions)?;
            }
            Ok(completed)
        })
    })?;
    Ok(TableIterator::new(completed.into_iter().map(|id| (id,))))
}

/// The jobs of a jq_complete_batch, each with its token and (if given) its result.
struct Batch {
    ids: Vec<i64>,
    tokens: Vec<i64>,
    results: Option<Vec<Option<Payload>>>,
}

impl Batch {
    /// The jobs whose id passes `keep`, each still with its token and result.
    fn only(self, keep: impl Fn(i64) -> bool) -> Batch {
        let kept: Vec<usize> = (0..self.ids.len()).filter(|i| keep(self.ids[*i])).collect();
        Batch {
            ids: kept.iter().map(|i| self.ids[*i]).collect(),
            tokens: kept.iter().map(|i| self.tokens[*i]).collect(),
            results: self.results.map(|results| kept.iter().map(|i| results[*i]).collect()),
        }
    }
}

/// A batch completion's row: the job, then as `Completed`.
type CompletedOfBatch = (i64, i32, TimestampWithTimeZone, bool, bool, Option<Vec<i64>>);

/// Completes a batch as `complete_one` completes one job: when this session claimed every job of
/// it from one queue (`held`), by the statement made for that queue; the jobs the forgetting
/// statement did not complete, and any other batch, by the statement for every job.
fn complete_many(
    db: &mut Session,
    mut batch: Batch,
    worker: &str,
    now: TimestampWithTimeZone,
) -> spi::Result<Vec<CompletedOfBatch>> {
    let known: Vec<Option<i32>> = batch.ids.iter().map(|id| held::finishing(*id)).collect();
    let one_queue = match known.first() {
        Some(Some(queue_id)) if known.iter().all(|of| *of == Some(*queue_id)) => Some(*queue_id),
        _ => None,
    };
    let keep = keeps(one_queue)?;
    let mut rows = Vec::new();
    if let (Some(queue_id), Some(false)) = (one_queue, keep) {
        let args = [
            batch.ids.clone().into(),
            worker.into(),
            batch.tokens.clone().into(),
            now.into(),
            "running".into(),
            queue_id.into(),
        ];
        rows = db.rows::<CompletedOfBatch>(COMPLETE_BATCH_FORGET, &args)?;
        if rows.len() == batch.ids.len() {
            return Ok(rows);
        }
        let done: HashSet<i64> = rows.iter().map(|row| row.0).collect();
        batch = batch.only(|id| !done.contains(&id));
    }
    let statement = match keep {
        Some(true) => COMPLETE_BATCH_KEPT.as_str(),
        _ => completing(COMPLETE_BATCH, &COMPLETE_BATCH_KEPT)?,
    };
    let args =
        [batch.ids.into(), worker.into(), batch.tokens.into(), now.into(), "running".into(), batch.results.into()];
    rows.extend(db.rows::<CompletedOfBatch>(statement, &args)?);
    Ok(rows)
}

/// Records a failed attempt. Not retryable, or no attempts left: the job is dead. Otherwise it is
/// pending again after `retry_in`, or after the queue's exponential backoff with jitter.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
#[allow(clippy::too_many_arguments)]
fn jq_fail(
    job_id: Option<i64>,
    worker: Option<&str>,
    lease_token: Option<i64>,
    error_code: Option<&str>,
    error_message: default!(Option<&str>, "NULL"),
    retryable: default!(Option<bool>, true),
    retry_in: default!(Option<Interval>, "NULL"),
) -> spi::Result<bool> {
    let now = clock::now();
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let error_code = input::error_code(error_code);
    let error_message = input::error_message(error_message);
    let retryable = input::retryable(retryable);
    let retry_in = input::retry_in(retry_in, now);
    if !consumable(job_id) {
        return Ok(false);
    }
    // The attempt ends here: a later claim of the job, by whichever session, tells its queue again.
    held::finishing(job_id);
    rights::as_owner(|| {
        db::connect(|db| {
            let args = [
                job_id.into(),
                worker.into(),
                lease_token.into(),
                error_code.into(),
                error_message.into(),
                retryable.into(),
                retry_in.into(),
                now.into(),
                "running".into(),
            ];
            let failed = db.rows::<(i64, String, bool, i32, TimestampWithTimeZone, bool, bool)>(FAIL, &args)?.pop();
            let Some((id, queue_name, dead, priority, available_at, keyed, dependents)) = failed else {
                count_refused(db, vec![job_id], Counter::StaleCompletions)?;
                return Ok(false);
            };
            counters::failure(&queue_name, error_code);
            counters::count(&queue_name, if dead { Counter::Deaths } else { Counter::Retries });
            if dead {
                finish::at_commit(&[id]);
                if dependents {
                    dependencies::ended(db, vec![id], now)?;
                }
            } else {
                front::lower_at_commit(&queue_name, Key { priority, available_at: available_at.into(), id }, keyed);
            }
            Ok(true)
        })
    })
}

/// The invariant of every row of jq_live_jobs, its CHECK constraint `jq_live_jobs_consistent`
/// (sql/schema/constraints.sql): the attempt budget (max_attempts at least 1, attempt_count within
/// it) and a lease exactly while the job runs. A function rather than the expression it computes:
/// PostgreSQL reads and compiles a table's CHECK expressions afresh for every statement that writes
/// it, and the expression, written out, cost each enqueue, claim and completion 6 to 7 µs where this
/// call costs about 2 (guide, "Operations notes"). Its path is not pinned, unlike every other
/// function's: it runs no statement and looks up no name (the label by its oid only), so a path
/// would guard nothing, and the switch to it would be paid for every row written.
#[pg_extern(immutable, parallel_safe, strict)]
fn jq_live_job_consistent(
    status: Status,
    max_attempts: i32,
    attempt_count: i32,
    leased: bool,
    lease_ends: bool,
) -> bool {
    let running = status.is("running");
    max_attempts >= 1 && (0..=max_attempts).contains(&attempt_count) && leased == running && lease_ends == running
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn heartbeat_extends_by_the_claimed_length_or_by_extend() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "2 minutes").unwrap();
        run(&format!("UPDATE jq_live_jobs SET lease_expires_at = clock_timestamp() + interval '1 s' WHERE id = {id}"));
        assert!(heartbeat(id, "w", token));
        assert!(one::<bool>(&format!(
            "SELECT lease_expires_at > clock_timestamp() + interval '119 s' FROM jq_jobs WHERE id = {id}"
        )));
        assert!(one::<bool>(&format!("SELECT jq_heartbeat({id}, 'w', {token}, interval '5 minutes')")));
        assert!(one::<bool>(&format!(
            "SELECT lease_expires_at > clock_timestamp() + interval '299 s' FROM jq_jobs WHERE id = {id}"
        )));
    }

    #[pg_test]
    fn heartbeat_never_extends_past_the_maximum_runtime() {
        run("INSERT INTO jq_queues (queue_name, max_runtime) VALUES ('capped', '90 seconds')");
        let id = enqueue("capped");
        let (_, token) = claim("capped", "w", "5 minutes").unwrap();
        // The claim itself is capped too.
        assert!(one::<bool>(&format!(
            "SELECT lease_expires_at = claimed_at + interval '90 s' AND run_deadline = lease_expires_at
             FROM jq_jobs WHERE id = {id}"
        )));
        assert!(one::<bool>(&format!("SELECT jq_heartbeat({id}, 'w', {token}, interval '1 hour')")));
        assert!(one::<bool>(&format!(
            "SELECT lease_expires_at = claimed_at + interval '90 s' FROM jq_jobs WHERE id = {id}"
        )));
    }

    #[pg_test]
    fn complete_needs_owner_token_and_an_unexpired_lease() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        let before = row_text(id);
        assert!(!complete(id, "intruder", token));
        assert!(!complete(id, "w", token + 1));
        assert!(!complete(id + 1000, "w", token));
        assert!(!heartbeat(id, "intruder", token));
        assert!(!fail(id, "w", token - 1));
        assert_eq!(row_text(id), before, "refused calls changed the job");
        assert!(complete(id, "w", token));
        assert!(one::<bool>(&format!(
            "SELECT status = 'succeeded' AND lease_owner IS NULL AND lease_expires_at IS NULL
                AND finished_at IS NOT NULL FROM jq_jobs WHERE id = {id}"
        )));
        assert!(!complete(id, "w", token), "a second completion must be refused");
        assert_eq!(event_count(), 0, "the happy path writes no events");
    }

    /// jq_complete_batch applies jq_complete's guard to each job on its own: the jobs whose worker,
    /// token and lease match are completed and returned; the rest, and unknown ids, are untouched.
    #[pg_test]
    fn complete_batch_completes_exactly_the_jobs_whose_guard_holds() {
        for _ in 0..4 {
            enqueue("q");
        }
        let claimed: Vec<(i64, i64)> = Spi::connect(|c| {
            c.select("SELECT id, lease_token FROM jq_claim('q', 'w', interval '30 s', 3)", None, &[])
                .unwrap()
                .map(|r| (r.get::<i64>(1).unwrap().unwrap(), r.get::<i64>(2).unwrap().unwrap()))
                .collect()
        });
        let [(a, ta), (b, tb), (c, tc)] = claimed[..] else { panic!("three jobs claimed: {claimed:?}") };
        let (other, to) = claim("q", "someone-else", "30 s").unwrap();
        let before = row_text(b);
        let completed: Vec<i64> = Spi::connect(|cl| {
            cl.select(
                &format!(
                    "SELECT id FROM jq_complete_batch(ARRAY[{a}, {b}, {c}, {c}, {other}, 999999], 'w',
                                                       ARRAY[{ta}, {tb} + 1, {tc}, {tc}, {to}, 1])
                     ORDER BY id"
                ),
                None,
                &[],
            )
            .unwrap()
            .map(|r| r.get::<i64>(1).unwrap().unwrap())
            .collect()
        });
        assert_eq!(completed, vec![a, c], "a stale token, another worker's job and an unknown id are refused; c once");
        assert_eq!((status(a), status(c)), ("succeeded".to_string(), "succeeded".to_string()));
        assert_eq!(row_text(b), before, "the job with a stale token changed");
        assert_eq!(status(other), "running");
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_complete_batch(ARRAY[]::bigint[], 'w', ARRAY[]::bigint[])"), 0);
    }

    /// An expired lease is judged by the clock at the call, not the transaction start (guide, "Why
    /// leases and fencing tokens"). This whole test is one transaction, so now() stays at its start while the lease runs out.
    #[pg_test]
    fn lease_expiry_is_judged_at_the_time_of_each_call() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "1 second").unwrap();
        sleep(1.2);
        let before = row_text(id);
        assert!(!heartbeat(id, "w", token));
        assert!(!complete(id, "w", token));
        assert!(!fail(id, "w", token));
        assert_eq!(row_text(id), before);
        assert_eq!(status(id), "running");
    }

    #[pg_test]
    fn fail_retryable_returns_the_job_to_pending_after_backoff() {
        run("INSERT INTO jq_queues (queue_name, backoff_base, backoff_cap) VALUES ('q', '10 s', '1 h')");
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(fail(id, "w", token));
        // Attempt 1 with base 10 s and equal jitter: the delay is between 5 s and 10 s.
        assert!(one::<bool>(&format!(
            "SELECT status = 'pending' AND lease_owner IS NULL AND last_error_code = 'E_TEST'
                AND last_error_message = 'boom'
                AND available_at BETWEEN clock_timestamp() + interval '4 s' AND clock_timestamp() + interval '10 s'
             FROM jq_jobs WHERE id = {id}"
        )));
        assert!(one::<bool>(&format!(
            "SELECT event = 'failed' AND status = 'pending' AND attempt = 1 AND worker = 'w'
                AND lease_token = {token} AND error_code = 'E_TEST' AND error_message = 'boom'
             FROM jq_job_events WHERE job_id = {id}"
        )));
        assert!(!fail(id, "w", token), "the lease is gone after a failure");
    }

    #[pg_test]
    fn fail_with_retry_in_uses_that_delay() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(one::<bool>(&format!(
            "SELECT jq_fail({id}, 'w', {token}, 'RATE_LIMITED', retry_in => interval '1 hour')"
        )));
        assert!(one::<bool>(&format!(
            "SELECT available_at BETWEEN clock_timestamp() + interval '59 min' AND clock_timestamp() + interval '60 min'
             FROM jq_jobs WHERE id = {id}"
        )));
    }

    #[pg_test]
    fn fail_not_retryable_or_on_the_last_attempt_is_dead() {
        let bad = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(one::<bool>(&format!("SELECT jq_fail({bad}, 'w', {token}, 'BAD_PAYLOAD', retryable => false)")));
        assert_eq!(status(bad), "dead");

        let last = one::<i64>("SELECT jq_enqueue('q', '{}', max_attempts => 1)");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(fail(last, "w", token));
        assert_eq!(status(last), "dead");
        assert!(one::<bool>(&format!(
            "SELECT finished_at IS NOT NULL AND attempt_count = 1 FROM jq_jobs WHERE id = {last}"
        )));
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_job_events WHERE status = 'dead'"), 2);
        assert_eq!(claim("q", "w", "30 s"), None);
    }

    #[pg_test]
    fn fail_keeps_error_messages_bounded() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(one::<bool>(&format!("SELECT jq_fail({id}, 'w', {token}, 'E', repeat('é', 5000))")));
        assert_eq!(one::<i32>(&format!("SELECT length(last_error_message) FROM jq_jobs WHERE id = {id}")), 2000);
        assert_eq!(one::<i32>("SELECT length(error_message) FROM jq_job_events"), 2000);
    }
}
