//! A job's outcome (guide, "Results and waiting"): jq_result reads it, jq_await waits for it.
//!
//! Either needs `enqueue`, `consume` or `manage` on the job's queue: whoever may put work in or
//! take it out may read what became of it. The queue is known only from the row, so the row is
//! read first and nothing of it is returned before the check.

use std::time::Instant;

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use super::wait;
use crate::db::{self, clock, payload::Payload, status::Status};
use crate::rights::{self, Privilege};
use crate::shared::{finish, wake};
use crate::{guc, input};

const RESULT: &str = include_str!("../../sql/queries/result.sql");

const READERS: [Privilege; 3] = [Privilege::Enqueue, Privilege::Consume, Privilege::Manage];

/// The columns of jq_result and jq_await.
type Outcome = (Status, Option<Payload>, Option<String>, Option<String>, Option<TimestampWithTimeZone>);

/// The job as result.sql reads it: its queue, whether it finished, its outcome, and whether its
/// queue keeps succeeded jobs.
type Row = (
    Option<String>,
    bool,
    Status,
    Option<Payload>,
    Option<String>,
    Option<String>,
    Option<TimestampWithTimeZone>,
    bool,
);

/// The job's status, result, last error and finish time; no row for a job that does not exist (or
/// was pruned). A job not yet finished has no result and no finish time.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
#[allow(clippy::type_complexity)]
fn jq_result(
    job_id: Option<i64>,
) -> spi::Result<
    TableIterator<
        'static,
        (
            name!(status, Status),
            name!(result, Option<Payload>),
            name!(last_error_code, Option<String>),
            name!(last_error_message, Option<String>),
            name!(finished_at, Option<TimestampWithTimeZone>),
        ),
    >,
> {
    let job_id = input::job_id(job_id);
    if !readable(job_id) {
        return Ok(TableIterator::new(None));
    }
    // In the calling statement's snapshot, as a STABLE function reads.
    let row = rights::as_owner(|| db::read_only_rows::<Row>(RESULT, &[job_id.into(), false.into()]))?.pop();
    Ok(TableIterator::new(row.map(outcome)))
}

/// Waits up to `wait` for the job to finish (succeeded, dead or cancelled) and returns what
/// jq_result would then; no row if it has not finished in time, or does not exist. A job this call
/// saw unfinished in a queue that keeps no succeeded job, and then finds gone, succeeded: its
/// completion deleted it (guide, "Queues that keep nothing"), and it has no result. Woken by the
/// finishing commit through shared memory when the library is preloaded, and polling otherwise;
/// sleeps without a snapshot horizon where it can (as a waiting claim does: guide, "Wake-ups").
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
#[allow(clippy::type_complexity)]
fn jq_await(
    job_id: Option<i64>,
    wait: Option<Interval>,
) -> spi::Result<
    TableIterator<
        'static,
        (
            name!(status, Status),
            name!(result, Option<Payload>),
            name!(last_error_code, Option<String>),
            name!(last_error_message, Option<String>),
            name!(finished_at, Option<TimestampWithTimeZone>),
        ),
    >,
> {
    let job_id = input::job_id(job_id);
    let wait = input::await_wait(wait, clock::now());
    if !wait.is_zero() {
        wait::refuse_outside_read_committed();
    }
    let deadline = Instant::now() + wait;
    let waiter = finish::Waiter::new(job_id);
    let may_release = wait::may_release_snapshot_horizon();
    // The job's queue, once a look found it unfinished in a queue that keeps nothing.
    let mut vanishes_on_success: Option<String> = None;
    loop {
        // Read before looking, so that a finish committing after the look still wakes the sleep.
        let seen = waiter.generation();
        // Asked again on every look: a right revoked while the call waits ends the wait (the
        // revocation's invalidation is taken in first).
        rights::accept_invalidations();
        // A job that does not exist (or was pruned), or that the caller may not read, will never
        // finish for it: no row at once, as jq_result has none.
        // A job that may be gone is checked by its queue, which its row can no longer tell.
        let readable = match &vanishes_on_success {
            Some(queue_name) => rights::may_use(queue_name, &READERS),
            None => readable(job_id),
        };
        if !readable {
            return Ok(TableIterator::new(None));
        }
        let Some(row) = look(job_id, vanishes_on_success.is_some())? else {
            return Ok(TableIterator::new(None));
        };
        if row.1 {
            return Ok(TableIterator::new(Some(outcome(row))));
        }
        if !row.7 {
            vanishes_on_success = row.0;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(TableIterator::new(None));
        }
        if may_release {
            wait::release_snapshot_horizon();
        }
        let most = wake::longest_sleep(std::time::Duration::from_millis(guc::WAIT_RECHECK_MS.get() as u64));
        waiter.sleep(seen, left.min(most));
    }
}

/// Whether the caller may read the job's outcome: false for a job of a queue on which it holds none
/// of the readers' rights, which is answered as a job that does not exist.
fn readable(job_id: i64) -> bool {
    rights::usable_jobs(&[job_id], &READERS).is_none_or(|usable| !usable.is_empty())
}

/// The job's row now, in a fresh snapshot (READ COMMITTED); `gone_succeeded`: a job that is gone
/// is answered as succeeded, with no result.
fn look(job_id: i64, gone_succeeded: bool) -> spi::Result<Option<Row>> {
    let args = [job_id.into(), gone_succeeded.into()];
    rights::as_owner(|| db::connect(|db| db.rows::<Row>(RESULT, &args))).map(|mut rows| rows.pop())
}

fn outcome((_, _, status, result, code, message, finished_at, _): Row) -> Outcome {
    (status, result, code, message, finished_at)
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    fn result_text(id: i64) -> String {
        one::<String>(&format!("SELECT format('%s|%s|%s|%s', status, result, last_error_code, finished_at IS NOT NULL) FROM jq_result({id})"))
    }

    #[pg_test]
    fn a_completion_keeps_its_result_and_jq_result_returns_it() {
        let id = enqueue("q");
        assert_eq!(result_text(id), "pending|||f", "a pending job has no result yet");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert_eq!(result_text(id), "running|||f");
        assert!(one::<bool>(&format!("SELECT jq_complete({id}, 'w', {token}, result => '{{\"sent\": 3}}')")));
        assert_eq!(result_text(id), "succeeded|{\"sent\": 3}||t");
        assert!(one::<bool>(&format!("SELECT result = '{{\"sent\": 3}}' FROM jq_jobs WHERE id = {id}")));
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_result(999999)"), 0, "no such job: no row");
    }

    /// guide, "Queues that keep nothing": a successful completion deletes the job, its events
    /// and its result, one by one and in a batch; a failure still keeps the job, and a queue that
    /// keeps its jobs is not touched.
    #[pg_test]
    fn a_queue_that_keeps_nothing_forgets_a_succeeded_job_with_its_events() {
        run(
            r#"SELECT jq_configure('gone', '{"keep_succeeded": false, "backoff_base": "1 ms", "backoff_cap": "1 ms"}')"#,
        );
        let id = enqueue("gone");
        let (_, token) = claim("gone", "w", "30 s").unwrap();
        assert!(one::<bool>(&format!("SELECT jq_fail({id}, 'w', {token}, 'E')")));
        assert_eq!(one::<i64>(&format!("SELECT count(*) FROM jq_job_events WHERE job_id = {id}")), 1);
        sleep(0.01);
        let (again, token) = claim("gone", "w", "30 s").unwrap();
        assert_eq!(again, id);
        assert!(one::<bool>(&format!(r#"SELECT jq_complete({id}, 'w', {token}, result => '{{"n": 1}}')"#)));
        let left = format!(
            "SELECT (SELECT count(*) FROM jq_jobs WHERE id = {id}) + (SELECT count(*) FROM jq_job_events WHERE job_id = {id})
                    + (SELECT count(*) FROM jq_result({id}))"
        );
        assert_eq!(one::<i64>(&left), 0, "nothing of the job is left");

        let batch =
            one::<Vec<i64>>("SELECT array_agg(x) FROM jq_enqueue_batch('gone', array_fill('{}'::jsonb, ARRAY[2])) x");
        let kept = enqueue("kept");
        let tokens =
            one::<Vec<i64>>("SELECT array_agg(lease_token ORDER BY id) FROM jq_claim('gone', 'w', batch_size => 2)");
        run(&format!(
            "SELECT jq_complete_batch(ARRAY[{}, {}], 'w', ARRAY[{}, {}])",
            batch[0], batch[1], tokens[0], tokens[1]
        ));
        let (_, token) = claim("kept", "w", "30 s").unwrap();
        assert!(complete(kept, "w", token));
        assert_eq!(
            one::<String>(
                "SELECT string_agg(queue_name || ':' || status, ',') FROM jq_jobs WHERE queue_name IN ('gone', 'kept')"
            ),
            "kept:succeeded"
        );
    }

    #[pg_test]
    fn jq_result_gives_a_dead_job_its_last_error() {
        let id = one::<i64>("SELECT jq_enqueue('q', '{}', max_attempts => 1)");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(one::<bool>(&format!("SELECT jq_fail({id}, 'w', {token}, 'BAD', 'broken', retryable => false)")));
        assert_eq!(result_text(id), "dead||BAD|t");
        assert_eq!(one::<String>(&format!("SELECT last_error_message FROM jq_result({id})")), "broken");
    }

    #[pg_test]
    fn a_refused_completion_keeps_no_result() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(!one::<bool>(&format!("SELECT jq_complete({id}, 'w', {token} + 1, result => '1')")));
        assert_eq!(result_text(id), "running|||f");
    }

    #[pg_test]
    #[should_panic(expected = "result is 20 bytes, more than pg_jobqueue.max_result_bytes (16)")]
    fn a_result_over_the_limit_is_refused() {
        run("SET LOCAL pg_jobqueue.max_result_bytes = 16");
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        run(&format!("SELECT jq_complete({id}, 'w', {token}, result => '\"{}\"')", "x".repeat(12)));
    }

    #[pg_test]
    fn complete_batch_keeps_each_jobs_result() {
        run("SELECT jq_enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[3]))");
        let rows: Vec<(i64, i64)> = Spi::connect(|c| {
            c.select("SELECT id, lease_token FROM jq_claim('q', 'w', interval '30 s', 3) ORDER BY id", None, &[])
                .unwrap()
                .map(|r| (r.get::<i64>(1).unwrap().unwrap(), r.get::<i64>(2).unwrap().unwrap()))
                .collect()
        });
        let [(a, ta), (b, tb), (c, tc)] = rows[..] else { panic!("three jobs: {rows:?}") };
        assert_eq!(
            one::<i64>(&format!(
                "SELECT count(*) FROM jq_complete_batch(ARRAY[{a}, {b}, {c}], 'w', ARRAY[{ta}, {tb}, {tc}],
                                                        ARRAY['1', NULL, '{{\"c\": true}}']::jsonb[])"
            )),
            3
        );
        assert_eq!(result_text(a), "succeeded|1||t");
        assert_eq!(result_text(b), "succeeded|||t", "a NULL element: no result");
        assert_eq!(result_text(c), "succeeded|{\"c\": true}||t");
    }

    #[pg_test]
    #[should_panic(expected = "job_ids gives job")]
    fn complete_batch_with_results_refuses_a_job_given_twice() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        run(&format!(
            "SELECT jq_complete_batch(ARRAY[{id}, {id}], 'w', ARRAY[{token}, {token}], ARRAY['1', '2']::jsonb[])"
        ));
    }

    #[pg_test]
    #[should_panic(expected = "results has 1 elements, job_ids has 2")]
    fn complete_batch_needs_one_result_per_job() {
        run("SELECT jq_complete_batch(ARRAY[1, 2], 'w', ARRAY[1, 1], ARRAY['1']::jsonb[])");
    }

    #[pg_test]
    fn await_returns_a_finished_job_at_once_and_nothing_for_one_still_running() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert_eq!(one::<i64>(&format!("SELECT count(*) FROM jq_await({id}, interval '0')")), 0);
        let started = one::<f64>("SELECT extract(epoch FROM clock_timestamp())::float8");
        assert_eq!(one::<i64>(&format!("SELECT count(*) FROM jq_await({id}, interval '300 ms')")), 0);
        let waited = one::<f64>("SELECT extract(epoch FROM clock_timestamp())::float8") - started;
        assert!(waited >= 0.3, "the wait ran its length: {waited} s");
        assert!(complete(id, "w", token));
        assert_eq!(
            one::<String>(&format!("SELECT status::text FROM jq_await({id}, interval '1 minute')")),
            "succeeded"
        );
    }

    #[pg_test]
    fn await_returns_at_once_for_a_job_that_does_not_exist() {
        // A wait of the whole minute would be cancelled, and fail the test.
        run("SET LOCAL statement_timeout = '20s'");
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_await(999999, interval '1 minute')"), 0);
    }

    #[pg_test]
    #[should_panic(expected = "wait must not be NULL")]
    fn await_needs_a_wait() {
        run("SELECT * FROM jq_await(1, NULL)");
    }
}
