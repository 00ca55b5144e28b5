//! The lease holder's verbs that keep the job: jq_progress reports how far it got (and
//! jq_progress_of reads it back), jq_snooze puts it back for later (guide, "Progress and checkpoints", "Snooze and deadlines"). Fenced like
//! jq_heartbeat: each acts only while the job runs under this worker's unexpired lease with this
//! token, and otherwise changes nothing and returns false. The caller needs `consume` on the job's
//! queue, checked before anything is read or touched, as in `lease`.

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use super::lease::{consumable, count_refused};
use crate::db::{self, clock, payload::Payload};
use crate::input;
use crate::rights;
use crate::shared::counters::Counter;
use crate::shared::front::{self, Key};
use crate::shared::wake;

const PROGRESS: &str = include_str!("../../sql/queries/progress.sql");
const PROGRESS_OF: &str = include_str!("../../sql/queries/progress_of.sql");
const SNOOZE: &str = include_str!("../../sql/queries/snooze.sql");

/// Keeps `progress` with the job (shown in jq_jobs, kept across retries) and renews the lease by
/// the length it was claimed with, as jq_heartbeat does.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_progress(
    job_id: Option<i64>,
    worker: Option<&str>,
    lease_token: Option<i64>,
    progress: Option<Payload>,
) -> spi::Result<bool> {
    let now = clock::now();
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let progress = input::progress(progress);
    if !consumable(job_id) {
        return Ok(false);
    }
    rights::as_owner(|| {
        db::connect(|db| {
            let args =
                [job_id.into(), worker.into(), lease_token.into(), progress.into(), now.into(), "running".into()];
            // Not a lease write (as a heartbeat is): the report is data a retry resumes from, so it
            // commits as durably as the session's synchronous_commit says.
            if db.rows::<(String,)>(PROGRESS, &args)?.is_empty() {
                count_refused(db, vec![job_id], Counter::StaleHeartbeats)?;
                return Ok(false);
            }
            Ok(true)
        })
    })
}

/// The job's last progress report, for the worker that holds it now (NULL otherwise, or without a
/// report): where a retried attempt resumes.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_progress_of(job_id: Option<i64>, worker: Option<&str>, lease_token: Option<i64>) -> spi::Result<Option<Payload>> {
    let now = clock::now();
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    // Checked before the read, so that a caller without the right learns nothing, not even whether
    // its token was the right one.
    if !consumable(job_id) {
        return Ok(None);
    }
    let args = [job_id.into(), worker.into(), lease_token.into(), now.into()];
    let found = rights::as_owner(|| db::read_only_rows::<(String, Option<Payload>)>(PROGRESS_OF, &args))?.pop();
    Ok(found.and_then(|(_, progress)| progress))
}

/// Returns the running job to pending after `delay`, giving back the attempt its claim counted.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_snooze(
    job_id: Option<i64>,
    worker: Option<&str>,
    lease_token: Option<i64>,
    delay: Option<Interval>,
) -> spi::Result<bool> {
    let now = clock::now();
    let job_id = input::job_id(job_id);
    let worker = input::worker(worker);
    let lease_token = input::lease_token(lease_token);
    let delay = input::snooze_delay(delay, now);
    if !consumable(job_id) {
        return Ok(false);
    }
    rights::as_owner(|| {
        db::connect(|db| {
            let args = [job_id.into(), worker.into(), lease_token.into(), delay.into(), now.into(), "running".into()];
            let snoozed = db.rows::<(String, i32, TimestampWithTimeZone, bool)>(SNOOZE, &args)?.pop();
            let Some((queue_name, priority, available_at, ordered)) = snoozed else {
                count_refused(db, vec![job_id], Counter::StaleCompletions)?;
                return Ok(false);
            };
            front::lower_at_commit(
                &queue_name,
                Key { priority, available_at: available_at.into(), id: job_id },
                ordered,
            );
            // The job may be claimable at once (no delay), and it frees a slot of its concurrency key.
            wake::at_commit(&queue_name);
            Ok(true)
        })
    })
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn progress_is_fenced_renews_the_lease_and_survives_a_retry() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "2 minutes").unwrap();
        run(&format!("UPDATE jq_live_jobs SET lease_expires_at = clock_timestamp() + interval '1 s' WHERE id = {id}"));
        assert!(!one::<bool>(&format!("SELECT jq_progress({id}, 'w', {token} + 1, '{{\"page\": 1}}')")));
        assert!(!one::<bool>(&format!("SELECT jq_progress({id}, 'other', {token}, '{{\"page\": 1}}')")));
        assert!(
            one::<bool>(&format!("SELECT progress IS NULL FROM jq_jobs WHERE id = {id}")),
            "refused reports keep nothing"
        );
        assert!(one::<bool>(&format!("SELECT jq_progress({id}, 'w', {token}, '{{\"page\": 7}}')")));
        assert!(one::<bool>(&format!(
            "SELECT progress = '{{\"page\": 7}}' AND lease_expires_at > clock_timestamp() + interval '119 s'
             FROM jq_jobs WHERE id = {id}"
        )));
        assert!(fail(id, "w", token));
        run(&format!("UPDATE jq_live_jobs SET available_at = clock_timestamp() WHERE id = {id}"));
        let (again, token2) = claim("q", "w", "30 s").unwrap();
        assert_eq!(again, id);
        assert_eq!(
            one::<String>(&format!("SELECT jq_progress_of({id}, 'w', {token2})::text")),
            "{\"page\": 7}",
            "the retried attempt reads where the last one stopped"
        );
        assert!(
            one::<bool>(&format!("SELECT jq_progress_of({id}, 'w', {token}) IS NULL")),
            "only under the current lease"
        );
        assert!(complete(id, "w", token2));
        assert!(
            one::<bool>(&format!("SELECT progress = '{{\"page\": 7}}' FROM jq_jobs WHERE id = {id}")),
            "kept in the history"
        );
    }

    #[pg_test]
    #[should_panic(expected = "progress is 20 bytes, more than pg_jobqueue.max_progress_bytes (16)")]
    fn progress_over_the_limit_is_refused() {
        run("SET LOCAL pg_jobqueue.max_progress_bytes = 16");
        run(&format!("SELECT jq_progress(1, 'w', 1, '\"{}\"')", "x".repeat(12)));
    }

    #[pg_test]
    fn snooze_returns_the_job_after_the_delay_without_spending_an_attempt() {
        let id = one::<i64>("SELECT jq_enqueue('q', '{}', max_attempts => 1)");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(!one::<bool>(&format!("SELECT jq_snooze({id}, 'w', {token} + 1, interval '1 hour')")));
        assert_eq!(status(id), "running");
        assert!(one::<bool>(&format!("SELECT jq_snooze({id}, 'w', {token}, interval '1 hour')")));
        assert!(one::<bool>(&format!(
            "SELECT status = 'pending' AND attempt_count = 0 AND lease_owner IS NULL
                AND available_at BETWEEN clock_timestamp() + interval '59 min' AND clock_timestamp() + interval '60 min'
             FROM jq_jobs WHERE id = {id}"
        )));
        assert!(one::<bool>(&format!(
            "SELECT event = 'snoozed' AND status = 'pending' AND attempt = 1 AND worker = 'w' AND lease_token = {token}
             FROM jq_job_events WHERE job_id = {id}"
        )));
        assert!(!complete(id, "w", token), "the lease ended with the snooze");
        assert_eq!(claim("q", "w", "30 s"), None, "not before the delay");
        run(&format!("UPDATE jq_live_jobs SET available_at = clock_timestamp() WHERE id = {id}"));
        // max_attempts 1, and the snoozed attempt was given back: the job can run once more.
        let (again, token2) = claim("q", "w", "30 s").unwrap();
        assert_eq!(again, id);
        assert!(token2 > token);
        assert!(fail(id, "w", token2));
        assert_eq!(status(id), "dead", "that attempt was its only one");
    }

    #[pg_test]
    #[should_panic(expected = "delay must not be negative")]
    fn snooze_refuses_a_negative_delay() {
        run("SELECT jq_snooze(1, 'w', 1, interval '-1 s')");
    }
}
