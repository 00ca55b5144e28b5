//! jq_claim: take claimable jobs under a lease, now or (with a `wait`) as soon as there are some.
//!
//! The SQL function checks its arguments (`input`) and the caller's right (`rights`); then each
//! claim, and each look of a waiting one, runs four stages, a file each:
//! - `prepare`: what the claim starts from: its share of maintenance, the token floor, the
//!   queue's settings, and (read before the claim's snapshot) the claim front and fairness bound;
//! - `admit`: flow control: the queue's rate, and a concurrency limit's free slots;
//! - `take`: the claim statements, in the turn of the key rotation (`api::keys`);
//! - `after`: the rate's count, what the front and fairness bound learn, counters, claim order.
//!
//! A stage returns what the next needs; a waiting claim (`api::wait`) is told by the look's
//! result when to look again.

mod admit;
mod after;
mod prepare;
mod take;
mod text;

use std::time::Duration;

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

// The plan tests (`api::plans`) check these statements' generic plans.
#[cfg(any(test, feature = "pg_test"))]
pub(crate) use {
    admit::slot_free, prepare::ANY_DUE, take::statement, take::statement_one_priority, take::statements_keyed,
};

use super::{held, maintenance, wait, wait::Look};
use crate::db::{clock, payload::Payload};
use crate::input;
use crate::rights::{self, Privilege};

/// One claimed job, in the column order of jq_claim's result.
pub type ClaimedJob = (i64, String, Payload, i32, i32, i32, i64, TimestampWithTimeZone);

/// What jq_claim was asked, its arguments checked.
#[derive(Clone, Copy)]
struct Request<'a> {
    queue_name: &'a str,
    worker: &'a str,
    lease: Option<Interval>,
    batch_size: i32,
}

/// Claims up to `batch_size` claimable jobs of the queue in one statement that never waits on a row
/// another claimer holds. Returns no rows when nothing is claimable, or, with a `wait`, when nothing
/// became claimable within it (see `wait`).
// pgrx reads the result columns from the signature, so the type is spelled out here.
#[allow(clippy::type_complexity)]
#[pg_extern(name = "jq_claim", volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
pub fn jq_claim_wait(
    queue_name: Option<&str>,
    worker: Option<&str>,
    lease: default!(Option<Interval>, "NULL"),
    batch_size: default!(Option<i32>, 1),
    wait: default!(Option<Interval>, "NULL"),
) -> spi::Result<
    TableIterator<
        'static,
        (
            name!(id, i64),
            name!(queue_name, String),
            name!(payload, Payload),
            name!(priority, i32),
            name!(attempt_count, i32),
            name!(max_attempts, i32),
            name!(lease_token, i64),
            name!(lease_expires_at, TimestampWithTimeZone),
        ),
    >,
> {
    let now = clock::now();
    let request = Request {
        queue_name: input::queue_name(queue_name),
        worker: input::worker(worker),
        lease: input::lease_length("lease", lease, now),
        batch_size: input::batch_size(batch_size),
    };
    let wait = input::wait(wait, now);
    rights::require(request.queue_name, Privilege::Consume);
    let jobs = match wait {
        None => rights::as_owner(|| claim_now(&request, false, now))?.found,
        Some(wait) => claim_waiting(&request, wait)?,
    };
    Ok(TableIterator::new(jobs))
}

fn claim_waiting(request: &Request, wait: Duration) -> spi::Result<Vec<ClaimedJob>> {
    wait::refuse_outside_read_committed();
    rights::as_owner(|| {
        let jobs = wait::look_until_found(request.queue_name, wait, |now| {
            // Asked again on every look: a right revoked while the claim waits ends it with 42501
            // (the revocation's invalidation is taken in first).
            rights::accept_invalidations();
            rights::require(request.queue_name, Privilege::Consume);
            claim_now(request, true, now)
        })?;
        maintenance::inline(request.queue_name, clock::now())?;
        Ok(jobs)
    })
}

/// One claim: the jobs claimable now, at most `batch_size`, in claim order. A waiting look
/// (`waiting`) must not write what it would have to sleep holding (see each stage); `now` is the
/// clock of this look, for its maintenance and its claim alike.
fn claim_now(request: &Request, waiting: bool, now: TimestampWithTimeZone) -> spi::Result<Look<ClaimedJob>> {
    let queue_name = request.queue_name;
    let Some(start) = prepare::start(queue_name, waiting, now)? else {
        return Ok(Look::nothing_until(None));
    };
    let admitted = match admit::rate(queue_name, start.settings.rates.queue, request.batch_size, now.into())? {
        Ok(admitted) => admitted,
        Err(opens_at) => return Ok(Look::nothing_until(opens_at)),
    };
    // A paused queue, or one that never had a job, gives nothing; no statement need say so.
    if start.settings.paused || start.settings.queue_id.is_none() {
        return Ok(Look::nothing_until(None));
    }
    let front = prepare::front(queue_name, now);
    let taken = take::take(request, &start, &front, admitted.batch_size, waiting, now)?;
    let look = after::claimed(queue_name, &front, admitted, taken, now)?;
    if let Some(queue_id) = start.settings.queue_id {
        // So that their completions in this session run the statement made for the queue.
        held::claimed(queue_id, look.found.iter().map(|job| job.0));
    }
    Ok(look)
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    /// A queue that has only had jobs of priority 0 claims with one range of the claim index, from
    /// its front on (claim.sql, "priorities"). Its first job of another priority marks the queue,
    /// and claims walk every priority again: a lower one is claimed while the front's has nothing
    /// due, not left behind a front that claims no longer look below.
    #[pg_test]
    fn a_first_job_of_another_priority_is_claimed_below_the_front() {
        let marked = "SELECT priorities FROM jq_queue_ids WHERE queue_name = 'p'";
        one::<i64>("SELECT count(*) FROM jq_enqueue_batch('p', array_fill('{}'::jsonb, ARRAY[3]))");
        one::<i64>("SELECT jq_enqueue('p', '{}', run_at => clock_timestamp() + interval '1 hour')");
        // The first claim's fairness check finds one priority, so the next ones are lean; claims
        // put the front on priority 0, the last of them finding nothing due.
        for taken in [1, 1, 1, 0, 0] {
            assert_eq!(one::<i64>("SELECT count(*) FROM jq_claim('p', 'w')"), taken);
        }
        assert!(!one::<bool>(marked));
        let low = one::<i64>("SELECT jq_enqueue('p', '{}', priority => -1)");
        assert!(one::<bool>(marked));
        assert_eq!(one::<i64>("SELECT coalesce(max(id), 0) FROM jq_claim('p', 'w')"), low);
        // A batch of another priority marks its queue too.
        one::<i64>("SELECT count(*) FROM jq_enqueue_batch('b', ARRAY['{}'::jsonb])");
        assert!(!one::<bool>("SELECT priorities FROM jq_queue_ids WHERE queue_name = 'b'"));
        one::<i64>("SELECT count(*) FROM jq_enqueue_batch('b', ARRAY['{}'::jsonb], priority => 3)");
        assert!(one::<bool>("SELECT priorities FROM jq_queue_ids WHERE queue_name = 'b'"));
    }

    #[pg_test]
    fn claim_follows_priority_then_available_at_then_id() {
        let low = one::<i64>("SELECT jq_enqueue('q', '{}', priority => 1)");
        let high_late =
            one::<i64>("SELECT jq_enqueue('q', '{}', priority => 9, run_at => clock_timestamp() - interval '1 s')");
        let high_early =
            one::<i64>("SELECT jq_enqueue('q', '{}', priority => 9, run_at => clock_timestamp() - interval '1 h')");
        let high_early_2 = one::<i64>("SELECT jq_enqueue('q', '{}', priority => 9, run_at => (SELECT available_at FROM jq_jobs WHERE id = currval('jq_jobs_id_seq')))");
        let order: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT id FROM jq_claim('q', 'w', batch_size => 10)", None, &[])
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        assert_eq!(order, vec![high_early, high_early_2, high_late, low]);
    }

    #[pg_test]
    fn claim_batch_changes_exactly_the_rows_it_returns() {
        run("SELECT jq_enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[5]))");
        let returned: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT id FROM jq_claim('q', 'w', batch_size => 3)", None, &[])
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        let running: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT id FROM jq_jobs WHERE status = 'running' ORDER BY id", None, &[])
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        let mut sorted = returned.clone();
        sorted.sort();
        assert_eq!(returned.len(), 3);
        assert_eq!(sorted, running);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_claim('q', 'w', batch_size => 10)"), 2);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_claim('q', 'w', batch_size => 10)"), 0);
    }

    #[pg_test]
    fn claim_sets_the_lease_and_increments_token_and_attempts() {
        let id = enqueue("q");
        assert!(one::<bool>(&format!(
            "SELECT c.id = {id} AND c.attempt_count = 1 AND c.lease_token = 1
                AND c.lease_expires_at BETWEEN clock_timestamp() + interval '59 s' AND clock_timestamp() + interval '60 s'
             FROM jq_claim('q', 'w1') c"
        )));
        assert!(one::<bool>(&format!(
            "SELECT status = 'running' AND lease_owner = 'w1' AND attempt_count = 1 AND lease_token = 1
             FROM jq_jobs WHERE id = {id}"
        )));
    }

    #[pg_test]
    fn claim_uses_the_queue_default_lease_when_none_given() {
        run("INSERT INTO jq_queues (queue_name, default_lease) VALUES ('slow', '10 minutes')");
        enqueue("slow");
        assert!(one::<bool>(
            "SELECT lease_expires_at > clock_timestamp() + interval '9 minutes' FROM jq_claim('slow', 'w')"
        ));
    }

    /// A queue's default lease set before `pg_jobqueue.max_lease` was lowered is cut to the limit.
    #[pg_test]
    fn the_default_lease_is_cut_to_a_lowered_max_lease() {
        run("INSERT INTO jq_queues (queue_name, default_lease) VALUES ('long', '10 hours')");
        enqueue("long");
        run("SET LOCAL pg_jobqueue.max_lease = '1h'");
        run("SELECT * FROM jq_claim('long', 'w')");
        assert!(one::<bool>(
            "SELECT lease_expires_at - claimed_at = interval '1 hour' AND lease_length = interval '1 hour'
             FROM jq_jobs WHERE queue_name = 'long'"
        ));
    }

    #[pg_test]
    fn claim_returns_nothing_from_an_empty_or_paused_queue() {
        assert_eq!(claim("empty", "w", "30 s"), None);
        run("INSERT INTO jq_queues (queue_name, paused) VALUES ('p', true)");
        let id = enqueue("p");
        assert_eq!(claim("p", "w", "30 s"), None);
        assert_eq!(status(id), "pending");
        run("UPDATE jq_queues SET paused = false WHERE queue_name = 'p'");
        assert_eq!(claim("p", "w", "30 s").map(|c| c.0), Some(id));
    }

    #[pg_test]
    fn ordering_key_runs_a_key_one_at_a_time_in_id_order() {
        let a1 = one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'a')");
        let a2 = one::<i64>("SELECT jq_enqueue('q', '{}', priority => 10, ordering_key => 'a')");
        let free = enqueue("q");
        let claimed: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT id FROM jq_claim('q', 'w', batch_size => 10) ORDER BY id", None, &[])
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        assert_eq!(claimed, vec![a1, free], "a2 waits behind a1 despite its priority");
        let token = one::<i64>(&format!("SELECT lease_token FROM jq_jobs WHERE id = {a1}"));
        assert!(complete(a1, "w", token));
        assert_eq!(claim("q", "w", "30 s").map(|c| c.0), Some(a2));
    }

    /// Collects the ids a query returns, in its order.
    fn ids(sql: &str) -> Vec<i64> {
        Spi::connect(|c| c.select(sql, None, &[]).unwrap().map(|r| r.get::<i64>(1).unwrap().unwrap()).collect())
    }

    /// Our choice for ordering keys: a dead or cancelled job no longer holds its key, so the jobs
    /// behind it run. A pending head with a future run_at does hold it.
    #[pg_test]
    fn ordering_key_dead_or_cancelled_heads_let_the_rest_pass() {
        let dead = one::<i64>("SELECT jq_enqueue('q', '{}', max_attempts => 1, ordering_key => 'k')");
        let cancelled = one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'k')");
        let third = one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'k')");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(one::<bool>(&format!("SELECT jq_fail({dead}, 'w', {token}, 'E', retryable => false)")));
        assert!(one::<bool>(&format!("SELECT jq_cancel({cancelled})")));
        assert_eq!(claim("q", "w", "30 s").map(|c| c.0), Some(third));
    }

    #[pg_test]
    fn ordering_key_head_with_a_future_run_at_holds_the_key() {
        one::<i64>(
            "SELECT jq_enqueue('q', '{}', run_at => clock_timestamp() + interval '1 hour', ordering_key => 'k')",
        );
        one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'k')");
        let other = one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'other')");
        assert_eq!(ids("SELECT id FROM jq_claim('q', 'w', batch_size => 10)"), vec![other]);
    }

    #[pg_test]
    fn ordering_key_redriven_head_waits_for_the_running_job_then_goes_first() {
        let first = one::<i64>("SELECT jq_enqueue('q', '{}', max_attempts => 1, ordering_key => 'k')");
        let second = one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'k')");
        one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'k')");
        let (_, t1) = claim("q", "w", "30 s").unwrap();
        assert!(one::<bool>(&format!("SELECT jq_fail({first}, 'w', {t1}, 'E', retryable => false)")));
        let (running, t2) = claim("q", "w", "30 s").unwrap();
        assert_eq!(running, second);
        assert!(one::<bool>(&format!("SELECT jq_retry({first})")));
        assert_eq!(claim("q", "w", "30 s"), None, "the re-driven head waits while `second` runs");
        assert!(complete(second, "w", t2));
        assert_eq!(claim("q", "w", "30 s").map(|c| c.0), Some(first));
        assert_eq!(claim("q", "w", "30 s"), None, "the third job waits for the re-driven head");
    }

    #[pg_test]
    fn concurrency_limit_caps_running_jobs_of_the_queue() {
        run("INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('lim', 2)");
        run("SELECT jq_enqueue_batch('lim', array_fill('{}'::jsonb, ARRAY[5]))");
        let first = ids("SELECT id FROM jq_claim('lim', 'w', batch_size => 5)");
        assert_eq!(first.len(), 2);
        assert_eq!(ids("SELECT id FROM jq_claim('lim', 'w')").len(), 0);
        let token = one::<i64>(&format!("SELECT lease_token FROM jq_jobs WHERE id = {}", first[0]));
        assert!(complete(first[0], "w", token));
        assert_eq!(ids("SELECT id FROM jq_claim('lim', 'w', batch_size => 5)").len(), 1);
        run("UPDATE jq_queues SET concurrency_limit = NULL WHERE queue_name = 'lim'");
        assert_eq!(ids("SELECT id FROM jq_claim('lim', 'w', batch_size => 5)").len(), 2);
    }

    #[pg_test]
    fn an_expired_but_unreaped_job_still_takes_a_slot() {
        run("SET LOCAL pg_jobqueue.inline_reap_max = 0");
        run("INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('lim', 1)");
        run("SELECT jq_enqueue_batch('lim', array_fill('{}'::jsonb, ARRAY[2]))");
        claim("lim", "w", "1 second").unwrap();
        sleep(1.1);
        assert_eq!(claim("lim", "w", "30 s"), None);
        assert_eq!(one::<i32>("SELECT jq_reap()"), 1);
        run("UPDATE jq_live_jobs SET available_at = clock_timestamp() WHERE status = 'pending'");
        assert!(claim("lim", "w", "30 s").is_some());
    }

    #[pg_test]
    fn a_starving_job_is_claimed_before_fresher_higher_priorities() {
        run("INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('f', '1 minute')");
        let fresh_high = one::<i64>("SELECT jq_enqueue('f', '{}', priority => 100)");
        let waiting_low =
            one::<i64>("SELECT jq_enqueue('f', '{}', priority => -5, run_at => clock_timestamp() - interval '30 s')");
        let starving_low = one::<i64>(
            "SELECT jq_enqueue('f', '{}', priority => -10, run_at => clock_timestamp() - interval '2 minutes')",
        );
        assert_eq!(
            ids("SELECT id FROM jq_claim('f', 'w', batch_size => 10)"),
            vec![starving_low, fresh_high, waiting_low],
            "the starving job first, then strict priority"
        );
    }

    /// Among starving jobs, age decides, not priority: under overload a queue degrades to arrival
    /// order for its old jobs, so a low priority cannot starve behind starving higher ones. The
    /// fairness check reads each priority's oldest jobs apart; this takes the oldest of all.
    #[pg_test]
    fn starving_jobs_are_claimed_oldest_first_whatever_their_priority() {
        run("INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('o', '1 minute')");
        let fresh = one::<i64>("SELECT jq_enqueue('o', '{}', priority => 9)");
        let starving_high = one::<i64>(
            "SELECT jq_enqueue('o', '{}', priority => 5, run_at => clock_timestamp() - interval '3 minutes')",
        );
        let starving_low = one::<i64>(
            "SELECT jq_enqueue('o', '{}', priority => 1, run_at => clock_timestamp() - interval '10 minutes')",
        );
        let starving_mid = one::<i64>(
            "SELECT jq_enqueue('o', '{}', priority => 3, run_at => clock_timestamp() - interval '5 minutes')",
        );
        assert_eq!(ids("SELECT id FROM jq_claim('o', 'w')"), vec![starving_low]);
        assert_eq!(
            ids("SELECT id FROM jq_claim('o', 'w', batch_size => 10)"),
            vec![starving_mid, starving_high, fresh],
            "the starving jobs by age, then claim order"
        );
    }

    #[pg_test]
    fn without_a_starvation_limit_priority_is_strict() {
        run("INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('s', NULL)");
        let high = one::<i64>("SELECT jq_enqueue('s', '{}', priority => 1)");
        let old_low = one::<i64>("SELECT jq_enqueue('s', '{}', run_at => clock_timestamp() - interval '1 day')");
        assert_eq!(ids("SELECT id FROM jq_claim('s', 'w', batch_size => 10)"), vec![high, old_low]);
    }

    #[pg_test]
    fn a_setting_change_applies_to_the_next_claim_not_the_running_job() {
        run("INSERT INTO jq_queues (queue_name, max_runtime) VALUES ('m', '90 seconds')");
        let id = enqueue("m");
        let (_, token) = claim("m", "w", "30 s").unwrap();
        run("UPDATE jq_queues SET max_runtime = '1 hour', default_lease = '10 minutes' WHERE queue_name = 'm'");
        assert!(one::<bool>(&format!("SELECT jq_heartbeat({id}, 'w', {token}, interval '10 minutes')")));
        assert!(one::<bool>(&format!(
            "SELECT lease_expires_at = claimed_at + interval '90 s' FROM jq_jobs WHERE id = {id}"
        )));
        enqueue("m");
        assert!(one::<bool>(
            "SELECT lease_expires_at > clock_timestamp() + interval '9 minutes' FROM jq_claim('m', 'w')"
        ));
    }
}
