//! Operator actions that bring jobs back or take them away: jq_retry, jq_cancel and jq_purge on one
//! job, jq_retry_dead and jq_purge_dead on a queue's dead jobs, bounded by `max_jobs` so that a large
//! backlog is worked off in short transactions. The caller needs `manage` on the queue; for one job
//! it is checked before the job is read, locked or written, and a job of a queue the caller may not
//! manage is answered as one that does not exist (see `rights::usable_jobs`).

use pgrx::prelude::*;
use pgrx::spi;

use crate::db::{self, clock};
use crate::error;
use crate::input;
use crate::rights::{self, Privilege};
use crate::shared::counters::{self, Counter};
use crate::shared::{finish, front};

const RETRY: &str = include_str!("../../sql/queries/retry.sql");
pub(crate) const DEDUP_KEY: &str = include_str!("../../sql/queries/retry_dedup_key.sql");
const CANCEL: &str = include_str!("../../sql/queries/cancel.sql");
const RETRY_DEAD: &str = include_str!("../../sql/queries/retry_dead.sql");
const PURGE_DEAD: &str = include_str!("../../sql/queries/purge_dead.sql");
const PURGE_JOB: &str = include_str!("../../sql/queries/purge_job.sql");

/// A dead or cancelled job becomes pending now: same id, history kept, a fresh attempt budget.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_retry(job_id: Option<i64>) -> spi::Result<bool> {
    let job_id = input::job_id(job_id);
    let now = clock::now();
    if !manageable(job_id) {
        return Ok(false);
    }
    rights::as_owner(|| {
        db::connect(|db| {
            // A key another live job holds: refused with that job named.
            if let Some((queue_name, Some(key))) =
                db.rows::<(String, Option<String>)>(DEDUP_KEY, &[job_id.into()])?.pop()
            {
                let args = [queue_name.as_str().into(), key.as_str().into()];
                if let Some(holder) = db.first::<i64>(super::enqueue::LIVE_HOLDER_OF_KEY, &args)? {
                    error::dedup_key_held(job_id, &key, holder, &queue_name);
                }
            }
            let Some((_, queue_name, depends_on)) =
                db.rows::<(i64, String, Option<Vec<i64>>)>(RETRY, &[job_id.into(), now.into()])?.pop()
            else {
                return Ok(false);
            };
            if let Some(depends_on) = depends_on {
                super::dependencies::redriven(db, job_id, &depends_on, now)?;
            }
            front::forget_at_commit(&queue_name);
            Ok(true)
        })
    })
}

/// A pending or running job becomes cancelled. A running job's lease is revoked with it, so its
/// worker's heartbeat and completion return false.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_cancel(job_id: Option<i64>) -> spi::Result<bool> {
    let job_id = input::job_id(job_id);
    let now = clock::now();
    if !manageable(job_id) {
        return Ok(false);
    }
    rights::as_owner(|| {
        db::connect(|db| {
            let Some((_, queue_name, dependents)) =
                db.rows::<(i64, String, bool)>(CANCEL, &[job_id.into(), now.into()])?.pop()
            else {
                return Ok(false);
            };
            if dependents {
                super::dependencies::ended(db, vec![job_id], now)?;
            }
            // A pending job this cancel took is pending again if it rolls back, maybe below a front
            // that claims moved past it meanwhile.
            front::forget_at_rollback(&queue_name);
            counters::count(&queue_name, Counter::Cancellations);
            finish::at_commit(&[job_id]);
            Ok(true)
        })
    })
}

/// A dead or cancelled job is deleted with its events, as `jq_purge_dead` deletes many. A dead job
/// that others depend on may go too: they were cancelled when it died.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_purge(job_id: Option<i64>) -> spi::Result<bool> {
    let job_id = input::job_id(job_id);
    if !manageable(job_id) {
        return Ok(false);
    }
    rights::as_owner(|| db::connect(|db| Ok(db.first::<i64>(PURGE_JOB, &[job_id.into()])?.is_some())))
}

/// Whether the caller may manage the job's queue: false for a job of a queue it may not manage,
/// which is answered as a job that does not exist.
fn manageable(job_id: i64) -> bool {
    rights::usable_jobs(&[job_id], &[Privilege::Manage]).is_none_or(|usable| !usable.is_empty())
}

/// Re-drives up to `max_jobs` dead jobs of a queue, optionally only those whose last error code is
/// `error_code`, each as `jq_retry` would. Returns how many.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_retry_dead(
    queue_name: Option<&str>,
    error_code: default!(Option<&str>, "NULL"),
    max_jobs: default!(Option<i32>, 1000),
) -> spi::Result<i32> {
    let queue_name = input::queue_name(queue_name);
    let max_jobs = input::max_jobs(max_jobs);
    rights::require(queue_name, Privilege::Manage);
    let now = clock::now();
    let redriven = rights::as_owner(|| {
        db::count_planned_per_call(RETRY_DEAD, &[queue_name.into(), error_code.into(), max_jobs.into(), now.into()])
    })?;
    if redriven > 0 {
        front::forget_at_commit(queue_name);
    }
    Ok(redriven)
}

/// Deletes up to `max_jobs` dead jobs of a queue, optionally only those with `error_code`, with
/// their events. Returns how many.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_purge_dead(
    queue_name: Option<&str>,
    error_code: default!(Option<&str>, "NULL"),
    max_jobs: default!(Option<i32>, 1000),
) -> spi::Result<i32> {
    let queue_name = input::queue_name(queue_name);
    let max_jobs = input::max_jobs(max_jobs);
    rights::require(queue_name, Privilege::Manage);
    rights::as_owner(|| {
        db::count_planned_per_call(PURGE_DEAD, &[queue_name.into(), error_code.into(), max_jobs.into()])
    })
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn retry_redrives_a_dead_job_with_its_id_history_and_a_fresh_budget() {
        let id = one::<i64>("SELECT jq_enqueue('q', '{}', max_attempts => 1)");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(fail(id, "w", token));
        assert_eq!(status(id), "dead");
        assert!(one::<bool>(&format!("SELECT jq_retry({id})")));
        assert!(one::<bool>(&format!(
            "SELECT status = 'pending' AND attempt_count = 0 AND finished_at IS NULL
                AND available_at <= clock_timestamp() FROM jq_jobs WHERE id = {id}"
        )));
        assert!(one::<bool>(&format!(
            "SELECT array_agg(event ORDER BY id) = ARRAY['failed', 'retried'] FROM jq_job_events WHERE job_id = {id}"
        )));
        let (again, token2) = claim("q", "w", "30 s").unwrap();
        assert_eq!(again, id);
        assert!(token2 > token, "tokens keep growing across a re-drive");
        assert!(!one::<bool>(&format!("SELECT jq_retry({id})")), "a running job is not re-driven");
        assert!(!one::<bool>("SELECT jq_retry(-1)"));
    }

    #[pg_test]
    fn cancel_revokes_a_running_lease_and_can_be_redriven() {
        let pending = enqueue("q");
        let running = enqueue("q");
        assert!(one::<bool>(&format!("SELECT jq_cancel({pending})")));
        let (id, token) = claim("q", "w", "30 s").unwrap();
        assert_eq!(id, running);
        assert!(one::<bool>(&format!("SELECT jq_cancel({running})")));
        assert!(!heartbeat(running, "w", token));
        assert!(!complete(running, "w", token));
        assert_eq!((status(pending), status(running)), ("cancelled".into(), "cancelled".into()));
        assert!(one::<bool>(&format!(
            "SELECT worker = 'w' AND lease_token = {token} FROM jq_job_events WHERE job_id = {running}"
        )));
        assert!(!one::<bool>(&format!("SELECT jq_cancel({running})")), "already cancelled");
        assert!(!one::<bool>("SELECT jq_cancel(-1)"));
        assert!(one::<bool>(&format!("SELECT jq_retry({pending})")));
        assert_eq!(status(pending), "pending");
    }

    /// Kills `n` jobs of `queue` through the API: claim, then a non-retryable failure with `code`.

    #[pg_test]
    fn retry_dead_redrives_a_queues_dead_jobs_by_error_code_in_bounded_batches() {
        let timeouts = make_dead("d", 3, "TIMEOUT");
        let bad = make_dead("d", 2, "BAD_PAYLOAD");
        make_dead("elsewhere", 1, "TIMEOUT");
        assert_eq!(one::<i32>("SELECT jq_retry_dead('d', 'TIMEOUT', max_jobs => 2)"), 2);
        assert_eq!(one::<i32>("SELECT jq_retry_dead('d', 'TIMEOUT')"), 1);
        for id in &timeouts {
            assert_eq!(status(*id), "pending");
        }
        for id in &bad {
            assert_eq!(status(*id), "dead");
        }
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_job_events WHERE event = 'retried'"), 3);
        assert!(
            one::<bool>("SELECT bool_and(attempt = 1) FROM jq_job_events WHERE event = 'retried'"),
            "a re-drive event keeps the attempt count the job died with"
        );
        assert_eq!(one::<i32>("SELECT jq_retry_dead('d')"), 2, "NULL error_code: every dead job");
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_jobs WHERE status = 'dead'"), 1, "other queues untouched");
    }

    #[pg_test]
    fn retry_dead_leaves_a_job_whose_dedup_key_is_taken() {
        let old = one::<i64>("SELECT jq_enqueue('d', '{}', max_attempts => 1, dedup_key => 'k')");
        let (_, token) = claim("d", "w", "30 s").unwrap();
        assert!(fail(old, "w", token));
        let newer = one::<i64>("SELECT jq_enqueue('d', '{}', dedup_key => 'k')");
        assert_ne!(newer, old);
        assert_eq!(one::<i32>("SELECT jq_retry_dead('d')"), 0);
        assert_eq!(status(old), "dead");
    }

    #[pg_test]
    fn purge_dead_deletes_dead_jobs_and_their_history() {
        let timeouts = make_dead("d", 2, "TIMEOUT");
        make_dead("d", 1, "BAD_PAYLOAD");
        assert_eq!(one::<i32>("SELECT jq_purge_dead('d', 'TIMEOUT')"), 2);
        assert_eq!(one::<i64>(&format!("SELECT count(*) FROM jq_jobs WHERE id = ANY(ARRAY{timeouts:?})")), 0);
        assert_eq!(one::<i64>(&format!("SELECT count(*) FROM jq_job_events WHERE job_id = ANY(ARRAY{timeouts:?})")), 0);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_jobs WHERE status = 'dead'"), 1);
    }

    #[pg_test]
    fn purge_deletes_one_dead_or_cancelled_job_and_its_history() {
        let events = |id: i64| one::<i64>(&format!("SELECT count(*) FROM jq_job_events WHERE job_id = {id}"));
        let exists = |id: i64| one::<bool>(&format!("SELECT EXISTS (SELECT FROM jq_jobs WHERE id = {id})"));
        let dead = make_dead("p", 2, "E");
        assert!(events(dead[1]) > 0);
        assert!(one::<bool>(&format!("SELECT jq_purge({})", dead[1])), "not the longest-dead: purged all the same");
        assert!(!exists(dead[1]));
        assert_eq!(events(dead[1]), 0, "its events go with it");
        assert_eq!(status(dead[0]), "dead", "the other dead job stays");
        assert!(!one::<bool>(&format!("SELECT jq_purge({})", dead[1])), "already gone");

        let cancelled = enqueue("p");
        assert!(one::<bool>(&format!("SELECT jq_cancel({cancelled})")));
        assert!(one::<bool>(&format!("SELECT jq_purge({cancelled})")));
        assert!(!exists(cancelled));
        assert_eq!(events(cancelled), 0);

        let running = enqueue("p");
        let (id, token) = claim("p", "w", "30 s").unwrap();
        assert_eq!(id, running);
        let succeeded = enqueue("s");
        let (id, done) = claim("s", "w", "30 s").unwrap();
        assert!(complete(id, "w", done));
        let pending = enqueue("p");
        for (id, state) in [(pending, "pending"), (running, "running"), (succeeded, "succeeded")] {
            assert!(!one::<bool>(&format!("SELECT jq_purge({id})")), "{state}");
            assert_eq!(status(id), state);
        }
        assert!(heartbeat(running, "w", token), "the running job keeps its lease");
        assert!(!one::<bool>("SELECT jq_purge(-1)"), "an unknown id");
    }

    #[pg_test]
    fn purge_takes_a_jobs_rows_of_its_dependencies() {
        let links = |id: i64| one::<i64>(&format!("SELECT count(*) FROM jq_job_dependencies WHERE job_id = {id}"));
        let parent = enqueue("wf");
        let other = enqueue("wf");
        let child = one::<i64>(&format!("SELECT jq_enqueue('wf', '{{}}', depends_on => ARRAY[{parent}, {other}])"));
        assert!(one::<bool>(&format!("SELECT jq_cancel({child})")));
        assert_eq!(links(child), 2);
        assert!(one::<bool>(&format!("SELECT jq_purge({child})")));
        assert_eq!(links(child), 0);
        assert_eq!(status(parent), "pending", "what it depended on stays");

        // A dead job that others depend on: they were cancelled when it died, and it may go.
        let dependent = one::<i64>(&format!("SELECT jq_enqueue('wf2', '{{}}', depends_on => ARRAY[{parent}])"));
        run(&format!("UPDATE jq_live_jobs SET max_attempts = 1 WHERE id = {parent}"));
        let (id, token) = claim("wf", "w", "30 s").unwrap();
        assert_eq!(id, parent);
        assert!(fail(id, "w", token));
        assert_eq!(status(dependent), "cancelled");
        assert!(one::<bool>(&format!("SELECT jq_purge({parent})")));
        assert!(one::<bool>(&format!("SELECT jq_purge({dependent})")));
        assert_eq!(
            one::<i64>(&format!("SELECT count(*) FROM jq_job_dependencies WHERE {parent} IN (job_id, depends_on)")),
            0
        );
    }
}
