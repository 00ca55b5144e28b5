//! Single-session tests: each rule of the SQL interface and each bad-input case, asserting on the rows that result.
//! Each test runs in its own transaction, rolled back afterwards. The server clock
//! (`clock_timestamp()`) moves inside that transaction, which is what lets these tests expire leases.

use pgrx::prelude::*;

#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    /// Runs a query that returns one value.
    fn one<T: FromDatum + IntoDatum>(sql: &str) -> T {
        Spi::get_one::<T>(sql).expect("query runs").expect("query returns a non-NULL value")
    }

    fn run(sql: &str) {
        Spi::run(sql).expect("statement runs");
    }

    /// Runs `sql` and returns "SQLSTATE message" of the error it raises, or "no error". A PL/pgSQL
    /// exception block keeps the error inside a subtransaction, so the test goes on cleanly.
    fn error_of(sql: &str) -> String {
        run("CREATE OR REPLACE FUNCTION pg_temp.error_of(q text) RETURNS text LANGUAGE plpgsql AS $f$
             BEGIN EXECUTE q; RETURN 'no error';
             EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ' ' || SQLERRM; END $f$");
        Spi::get_one_with_args::<String>("SELECT pg_temp.error_of($1)", &[sql.into()])
            .expect("error_of runs")
            .expect("error_of returns text")
    }

    fn job_count() -> i64 {
        one("SELECT count(*) FROM jq_jobs")
    }

    fn event_count() -> i64 {
        one("SELECT count(*) FROM jq_job_events")
    }

    /// Asserts that `sql` fails with `sqlstate`, that the message names `argument`, and that nothing
    /// was written.
    fn assert_refused(sql: &str, sqlstate: &str, argument: &str) {
        let (jobs, events) = (job_count(), event_count());
        let error = error_of(sql);
        assert!(error.starts_with(sqlstate), "{sql}: expected {sqlstate}, got: {error}");
        assert!(error.contains(argument), "{sql}: message should name {argument}: {error}");
        assert_eq!((jobs, events), (job_count(), event_count()), "{sql} wrote something");
    }

    fn enqueue(queue: &str) -> i64 {
        Spi::get_one_with_args::<i64>("SELECT jq_enqueue($1, '{\"k\": 1}')", &[queue.into()])
            .unwrap()
            .unwrap()
    }

    /// Claims one job; returns (id, lease_token).
    fn claim(queue: &str, worker: &str, lease: &str) -> Option<(i64, i64)> {
        Spi::connect(|c| {
            let rows = c
                .select(
                    "SELECT id, lease_token FROM jq_claim($1, $2, $3::interval)",
                    None,
                    &[queue.into(), worker.into(), lease.into()],
                )
                .unwrap();
            if rows.is_empty() {
                return None;
            }
            let (id, token) = rows.first().get_two::<i64, i64>().unwrap();
            Some((id.unwrap(), token.unwrap()))
        })
    }

    fn status(id: i64) -> String {
        Spi::get_one_with_args::<String>("SELECT status::text FROM jq_jobs WHERE id = $1", &[id.into()])
            .unwrap()
            .unwrap()
    }

    fn call_bool(sql: &str, id: i64, worker: &str, token: i64) -> bool {
        Spi::get_one_with_args::<bool>(sql, &[id.into(), worker.into(), token.into()]).unwrap().unwrap()
    }

    fn complete(id: i64, worker: &str, token: i64) -> bool {
        call_bool("SELECT jq_complete($1, $2, $3)", id, worker, token)
    }

    fn heartbeat(id: i64, worker: &str, token: i64) -> bool {
        call_bool("SELECT jq_heartbeat($1, $2, $3)", id, worker, token)
    }

    fn fail(id: i64, worker: &str, token: i64) -> bool {
        call_bool("SELECT jq_fail($1, $2, $3, 'E_TEST', 'boom')", id, worker, token)
    }

    /// The job row as text, to compare "before" and "after" of a call that must change nothing.
    fn row_text(id: i64) -> String {
        Spi::get_one_with_args::<String>("SELECT j::text FROM jq_jobs j WHERE id = $1", &[id.into()])
            .unwrap()
            .unwrap()
    }

    fn sleep(seconds: f64) {
        Spi::run_with_args("SELECT pg_sleep($1)", &[seconds.into()]).unwrap();
    }

    #[pg_test]
    fn enqueue_stores_a_pending_job_with_defaults() {
        let id = enqueue("emails");
        assert!(one::<bool>(&format!(
            "SELECT status = 'pending' AND priority = 0 AND attempt_count = 0 AND max_attempts = 8
                AND lease_token = 0 AND lease_owner IS NULL AND lease_expires_at IS NULL
                AND available_at = created_at AND finished_at IS NULL AND payload = '{{\"k\": 1}}'
             FROM jq_jobs WHERE id = {id}"
        )));
    }

    #[pg_test]
    fn enqueue_takes_max_attempts_from_the_queue_unless_given() {
        run("INSERT INTO jq_queues (queue_name, max_attempts) VALUES ('q3', 3)");
        let from_queue = one::<i64>("SELECT jq_enqueue('q3', '{}')");
        let explicit = one::<i64>("SELECT jq_enqueue('q3', '{}', max_attempts => 5)");
        let other_queue = one::<i64>("SELECT jq_enqueue('other', '{}')");
        let max = |id: i64| one::<i32>(&format!("SELECT max_attempts FROM jq_jobs WHERE id = {id}"));
        assert_eq!((max(from_queue), max(explicit), max(other_queue)), (3, 5, 8));
    }

    #[pg_test]
    fn ids_are_never_reused_and_ascend() {
        let a = enqueue("q");
        let b = enqueue("q");
        run(&format!("DELETE FROM jq_jobs WHERE id = {b}"));
        let c = enqueue("q");
        assert!(a < b && b < c);
    }

    #[pg_test]
    fn run_at_delays_a_job() {
        run("SELECT jq_enqueue('q', '{}', run_at => clock_timestamp() + interval '1 hour')");
        assert_eq!(claim("q", "w", "30 s"), None);
        let past = one::<i64>("SELECT jq_enqueue('q', '{}', run_at => clock_timestamp() - interval '1 minute')");
        assert_eq!(claim("q", "w", "30 s").map(|c| c.0), Some(past));
        assert_eq!(one::<i64>("SELECT scheduled FROM jq_queue_stats WHERE queue_name = 'q'"), 1);
    }

    #[pg_test]
    fn enqueue_batch_returns_ids_in_input_order() {
        let ids: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT * FROM jq_enqueue_batch('b', ARRAY['{\"n\":1}', '{\"n\":2}', '{\"n\":3}']::jsonb[], 7)", None, &[])
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        assert_eq!(ids.len(), 3);
        for (i, id) in ids.iter().enumerate() {
            let n = one::<i32>(&format!("SELECT (payload->>'n')::int FROM jq_jobs WHERE id = {id} AND priority = 7"));
            assert_eq!(n as usize, i + 1);
        }
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_enqueue_batch('b', ARRAY[]::jsonb[])"), 0);
    }

    #[pg_test]
    fn claim_follows_priority_then_available_at_then_id() {
        let low = one::<i64>("SELECT jq_enqueue('q', '{}', priority => 1)");
        let high_late = one::<i64>("SELECT jq_enqueue('q', '{}', priority => 9, run_at => clock_timestamp() - interval '1 s')");
        let high_early = one::<i64>("SELECT jq_enqueue('q', '{}', priority => 9, run_at => clock_timestamp() - interval '1 h')");
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
    fn heartbeat_extends_by_the_claimed_length_or_by_extend() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "2 minutes").unwrap();
        run(&format!("UPDATE jq_jobs SET lease_expires_at = clock_timestamp() + interval '1 s' WHERE id = {id}"));
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

    #[pg_test]
    fn complete_batch_refuses_bad_arguments() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert_refused(&format!("SELECT jq_complete_batch(NULL, 'w', ARRAY[{token}])"), "22004", "job_ids");
        assert_refused(&format!("SELECT jq_complete_batch(ARRAY[{id}], 'w', NULL)"), "22004", "lease_tokens");
        assert_refused(&format!("SELECT jq_complete_batch(ARRAY[{id}], NULL, ARRAY[{token}])"), "22004", "worker");
        assert_refused(&format!("SELECT jq_complete_batch(ARRAY[{id}, NULL], 'w', ARRAY[{token}, 1])"), "22004", "job_ids[2]");
        assert_refused(&format!("SELECT jq_complete_batch(ARRAY[{id}], 'w', ARRAY[NULL::bigint])"), "22004", "lease_tokens[1]");
        assert_refused(&format!("SELECT jq_complete_batch(ARRAY[{id}], 'w', ARRAY[{token}, 1])"), "22023", "lease_tokens");
        run("SET LOCAL pg_jobqueue.max_batch_size = 1");
        assert_refused(&format!("SELECT jq_complete_batch(ARRAY[{id}, 1], 'w', ARRAY[{token}, 1])"), "22023", "max_batch_size");
        assert_eq!(status(id), "running", "a refused call completed the job");
    }

    /// Guarantee 6: an expired lease is judged by the clock at the call, not the transaction start. This
    /// whole test is one transaction, so now() stays at its start while the lease runs out.
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
    fn backoff_grows_exponentially_and_stops_at_the_cap() {
        run("INSERT INTO jq_queues (queue_name, backoff_base, backoff_cap) VALUES ('b', '1 s', '30 s')");
        let delays: Vec<f64> = (1..=8)
            .map(|attempt| one::<f64>(&format!("SELECT extract(epoch FROM jq_backoff('b', {attempt}))::float8")))
            .collect();
        for (i, d) in delays.iter().enumerate() {
            let nominal = f64::min(30.0, 2f64.powi(i as i32));
            assert!(*d >= nominal / 2.0 && *d <= nominal, "attempt {}: {d} outside [{}, {nominal}]", i + 1, nominal / 2.0);
        }
        assert!(one::<f64>("SELECT extract(epoch FROM jq_backoff('b', 1000))::float8") <= 30.0);
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
        assert_eq!((status(retried), status(spent), status(healthy)), ("pending".into(), "dead".into(), "running".into()));
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
        run(&format!("UPDATE jq_jobs SET available_at = clock_timestamp() WHERE id = {id}"));
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

    #[pg_test]
    fn dedup_key_returns_the_live_job_until_it_finishes() {
        let first = one::<i64>("SELECT jq_enqueue('q', '{}', dedup_key => 'user-7')");
        assert_eq!(one::<i64>("SELECT jq_enqueue('q', '{\"other\": 1}', dedup_key => 'user-7')"), first);
        assert_ne!(one::<i64>("SELECT jq_enqueue('other', '{}', dedup_key => 'user-7')"), first);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_jobs WHERE queue_name = 'q'"), 1);
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert_eq!(one::<i64>("SELECT jq_enqueue('q', '{}', dedup_key => 'user-7')"), first, "running still holds the key");
        assert!(complete(first, "w", token));
        assert_ne!(one::<i64>("SELECT jq_enqueue('q', '{}', dedup_key => 'user-7')"), first);
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
        one::<i64>("SELECT jq_enqueue('q', '{}', run_at => clock_timestamp() + interval '1 hour', ordering_key => 'k')");
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
        run("UPDATE jq_jobs SET available_at = clock_timestamp() WHERE status = 'pending'");
        assert!(claim("lim", "w", "30 s").is_some());
    }

    /// Without a background reaper (this test server does not preload the library), a claim first
    /// reaps expired leases of its own queue, and only of its own queue.
    #[pg_test]
    fn a_claim_recovers_expired_leases_of_its_queue_without_a_reaper() {
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
        run(&format!("UPDATE jq_jobs SET available_at = clock_timestamp() WHERE id = {stuck}"));
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

    #[pg_test]
    fn a_starving_job_is_claimed_before_fresher_higher_priorities() {
        run("INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('f', '1 minute')");
        let fresh_high = one::<i64>("SELECT jq_enqueue('f', '{}', priority => 100)");
        let waiting_low = one::<i64>("SELECT jq_enqueue('f', '{}', priority => -5, run_at => clock_timestamp() - interval '30 s')");
        let starving_low = one::<i64>("SELECT jq_enqueue('f', '{}', priority => -10, run_at => clock_timestamp() - interval '2 minutes')");
        assert_eq!(
            ids("SELECT id FROM jq_claim('f', 'w', batch_size => 10)"),
            vec![starving_low, fresh_high, waiting_low],
            "the starving job first, then strict priority"
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
        assert!(one::<bool>("SELECT lease_expires_at > clock_timestamp() + interval '9 minutes' FROM jq_claim('m', 'w')"));
    }

    /// Kills `n` jobs of `queue` through the API: claim, then a non-retryable failure with `code`.
    fn make_dead(queue: &str, n: i32, code: &str) -> Vec<i64> {
        run(&format!("SELECT jq_enqueue_batch('{queue}', array_fill('{{}}'::jsonb, ARRAY[{n}]))"));
        (0..n)
            .map(|_| {
                let (id, token) = claim(queue, "w", "30 s").unwrap();
                assert!(one::<bool>(&format!("SELECT jq_fail({id}, 'w', {token}, '{code}', retryable => false)")));
                id
            })
            .collect()
    }

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
        run("UPDATE jq_jobs SET finished_at = clock_timestamp() - interval '2 hours' WHERE status = 'succeeded' AND id % 2 = 0");
        run("UPDATE jq_jobs SET finished_at = clock_timestamp() - interval '8 days' WHERE status IN ('succeeded', 'dead') AND id % 2 = 1");
        run("UPDATE jq_jobs SET finished_at = clock_timestamp() - interval '8 days' WHERE status = 'dead'");
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

    #[pg_test]
    fn stats_count_each_state_per_queue() {
        run("SELECT jq_enqueue_batch('s', array_fill('{}'::jsonb, ARRAY[4]))");
        run("SELECT jq_enqueue('s', '{}', run_at => clock_timestamp() + interval '1 hour')");
        let (id, token) = claim("s", "w", "5 s").unwrap();
        let (dead, _) = claim("s", "w", "1 hour").unwrap();
        run(&format!("UPDATE jq_jobs SET status = 'dead', lease_owner = NULL, lease_expires_at = NULL, finished_at = now() - interval '1 minute' WHERE id = {dead}"));
        let cancelled = enqueue("s");
        run(&format!("SELECT jq_cancel({cancelled})"));
        assert!(one::<bool>(
            "SELECT pending = 2 AND scheduled = 1 AND running = 1 AND expiring_10s = 1 AND dead = 1
                AND cancelled = 1 AND oldest_claimable_age IS NOT NULL AND oldest_dead_age >= interval '1 minute'
             FROM jq_queue_stats WHERE queue_name = 's'"
        ));
        assert!(complete(id, "w", token));
    }

    #[pg_test]
    fn health_flags_trip_at_their_thresholds() {
        let flags = |queue: &str| -> (bool, bool, bool) {
            Spi::connect(|c| {
                let row = c
                    .select(
                        "SELECT claimable_age_warning, expiring_leases_warning, dead_age_warning
                         FROM jq_queue_health WHERE queue_name = $1",
                        None,
                        &[queue.into()],
                    )?
                    .first();
                Ok::<_, pgrx::spi::Error>((
                    row.get::<bool>(1)?.unwrap(),
                    row.get::<bool>(2)?.unwrap(),
                    row.get::<bool>(3)?.unwrap(),
                ))
            })
            .unwrap()
        };
        // A queue without settings: claimable for 6 minutes is past the default 5.
        enqueue("h");
        run("UPDATE jq_jobs SET available_at = clock_timestamp() - interval '6 minutes' WHERE queue_name = 'h'");
        assert_eq!(flags("h"), (true, false, false));
        run("INSERT INTO jq_queues (queue_name, warn_claimable_age) VALUES ('h', '10 minutes')");
        assert_eq!(flags("h"), (false, false, false));
        run("UPDATE jq_queues SET warn_claimable_age = '5 minutes 59 seconds' WHERE queue_name = 'h'");
        assert_eq!(flags("h").0, true);

        // Three leases ending within 10 s: the flag trips at 3, not at 4.
        run("SELECT jq_enqueue_batch('h2', array_fill('{}'::jsonb, ARRAY[3]))");
        run("SELECT count(*) FROM jq_claim('h2', 'w', interval '5 seconds', 3)");
        run("INSERT INTO jq_queues (queue_name, warn_expiring_leases) VALUES ('h2', 4)");
        assert_eq!(flags("h2"), (false, false, false));
        run("UPDATE jq_queues SET warn_expiring_leases = 3 WHERE queue_name = 'h2'");
        assert_eq!(flags("h2"), (false, true, false));

        // A job dead for two hours is past the default hour; NULL turns the check off.
        enqueue("h3");
        run("SELECT jq_fail(id, 'w', lease_token, 'E', retryable => false) FROM jq_claim('h3', 'w')");
        run("UPDATE jq_jobs SET finished_at = clock_timestamp() - interval '2 hours' WHERE queue_name = 'h3'");
        assert_eq!(flags("h3"), (false, false, true));
        run("INSERT INTO jq_queues (queue_name, warn_dead_age) VALUES ('h3', NULL)");
        assert_eq!(flags("h3"), (false, false, false));
    }

    #[pg_test]
    fn without_preload_there_are_no_counters_and_metrics_still_render() {
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_queue_counters()"), 0);
        enqueue("m");
        let metrics = one::<String>("SELECT jq_metrics()");
        assert!(metrics.contains("jq_stats_available 0\n"), "{metrics}");
        assert!(metrics.contains("jq_jobs{queue=\"m\",status=\"pending\"} 1\n"), "{metrics}");
    }

    #[pg_test]
    fn functions_work_whatever_the_callers_search_path() {
        run("CREATE SCHEMA decoy");
        run("CREATE TABLE decoy.jq_jobs (id int)");
        run("SET LOCAL search_path = decoy, pg_catalog");
        let id = one::<i64>("SELECT public.jq_enqueue('q', '{}')");
        assert_eq!(one::<i64>("SELECT id FROM public.jq_claim('q', 'w')"), id);
        run("RESET search_path");
    }

    #[pg_test]
    fn every_table_is_kept_by_pg_dump() {
        assert_eq!(
            one::<i32>("SELECT cardinality(extconfig) FROM pg_extension WHERE extname = 'pg_jobqueue'"),
            6
        );
    }

    #[pg_test]
    fn queue_settings_are_validated_by_constraints() {
        for bad in [
            "INSERT INTO jq_queues (queue_name, default_lease) VALUES ('q', '0 s')",
            "INSERT INTO jq_queues (queue_name, max_attempts) VALUES ('q', 0)",
            "INSERT INTO jq_queues (queue_name, backoff_base, backoff_cap) VALUES ('q', '1 min', '1 s')",
            "INSERT INTO jq_queues (queue_name, max_runtime) VALUES ('q', '-1 s')",
            "INSERT INTO jq_queues (queue_name) VALUES ('bad name')",
            "INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('q', 0)",
            "INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('q', '0 s')",
            "INSERT INTO jq_queues (queue_name, retention) VALUES ('q', '-1 day')",
        ] {
            assert!(error_of(bad).starts_with("23514"), "{bad} was accepted");
        }
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_queues"), 0);
    }

    #[pg_test]
    fn interval_settings_stay_in_bounds() {
        for bad in [
            "INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('q', '300000 years')",
            "INSERT INTO jq_queues (queue_name, default_lease) VALUES ('q', '300000 years')",
            "INSERT INTO jq_queues (queue_name, max_runtime) VALUES ('q', '1 mon -30 days 23:59:59')",
            "INSERT INTO jq_queues (queue_name, retention) VALUES ('q', '10000 years')",
            "INSERT INTO jq_queues (queue_name, backoff_base, backoff_cap) VALUES ('q', '1 s', '101 years')",
        ] {
            assert!(error_of(bad).starts_with("23514"), "{bad} was accepted");
        }
        run("INSERT INTO jq_queues (queue_name, retention, max_runtime) VALUES ('q', '100 years', '1 mon 2 days')");
    }

    #[pg_test]
    fn configure_changes_the_named_settings_and_refuses_bad_ones_whole() {
        let settings = one::<pgrx::JsonB>("SELECT jq_configure('cfg', '{\"max_attempts\": 3, \"concurrency_limit\": 2}')").0;
        assert_eq!(settings["max_attempts"], 3);
        assert_eq!(settings["concurrency_limit"], 2);
        assert_eq!(settings["default_lease"], "00:01:00", "the others keep their defaults");
        let settings = one::<pgrx::JsonB>("SELECT jq_configure('cfg', '{\"concurrency_limit\": null}')").0;
        assert!(settings["concurrency_limit"].is_null());
        assert_eq!(settings["max_attempts"], 3, "a setting not named is kept");
        for bad in [
            "'{\"nonsense\": 1}'",
            "'[1]'",
            "'{\"max_attempts\": 0}'",
            "'{\"max_attempts\": 5, \"default_lease\": \"2 days\"}'",
            "'{\"max_attempts\": 5, \"retention\": \"-1 s\"}'",
            "'{\"max_attempts\": \"five\"}'",
        ] {
            let error = error_of(&format!("SELECT jq_configure('cfg', {bad})"));
            assert!(error.starts_with("22023") && error.contains("settings"), "{bad}: {error}");
        }
        assert_eq!(one::<i32>("SELECT max_attempts FROM jq_queues WHERE queue_name = 'cfg'"), 3, "a refused change changes nothing");
    }

    #[pg_test]
    fn interval_arguments_are_judged_by_what_they_add() {
        enqueue("iv");
        // Less than a day as intervals compare, but it adds a month less 30 days plus almost a day.
        run("SET LOCAL pg_jobqueue.max_lease = '1d'");
        run("SET LOCAL TimeZone = 'UTC'");
        // Which it is depends on the length of this month: whatever it is, the claim must agree.
        let claim = "SELECT count(*) FROM jq_claim('iv', 'w', interval '1 mon -30 days 23:59:59')";
        let adds = "SELECT clock_timestamp() + interval '1 mon -30 days 23:59:59' - clock_timestamp()";
        let added = one::<pgrx::datum::Interval>(adds).as_micros();
        if added > 86_400_000_000 || added <= 0 {
            assert_refused(claim, "22023", "lease");
        } else {
            assert_eq!(one::<i64>(claim), 1);
        }
        assert_refused("SELECT count(*) FROM jq_claim('iv', 'w', interval '178000000 years')", "22023", "lease");
        assert_refused("SELECT count(*) FROM jq_claim('iv', 'w', wait => interval '2147483647 days')", "22023", "wait");
        assert_refused("SELECT jq_fail(1, 'w', 1, 'E', retry_in => interval '100 years')", "22023", "retry_in");
        assert_refused(&format!("SELECT jq_enqueue('iv', '{{}}', dedup_key => '{}')", "k".repeat(257)), "22023", "dedup_key");
        assert_refused(&format!("SELECT jq_enqueue('iv', '{{}}', ordering_key => '{}')", "k".repeat(257)), "22023", "ordering_key");
        assert_refused("SELECT count(*) FROM jq_enqueue_batch('iv', array_fill('{}'::jsonb, ARRAY[1001]))", "22023", "payloads");
    }

    #[pg_test]
    fn bad_enqueue_arguments_are_refused() {
        assert_refused("SELECT jq_enqueue(NULL, '{}')", "22004", "queue_name");
        assert_refused("SELECT jq_enqueue('', '{}')", "22023", "queue_name");
        assert_refused(&format!("SELECT jq_enqueue('{}', '{{}}')", "q".repeat(61)), "22023", "queue_name");
        assert_refused("SELECT jq_enqueue('has space', '{}')", "22023", "queue_name");
        assert_refused("SELECT jq_enqueue('semi;colon', '{}')", "22023", "queue_name");
        assert_refused("SELECT jq_enqueue('q', NULL)", "22004", "payload");
        assert_refused("SELECT jq_enqueue('q', '{}', max_attempts => 0)", "22023", "max_attempts");
        assert_refused("SELECT jq_enqueue('q', '{}', priority => NULL)", "22004", "priority");
        assert_refused("SELECT jq_enqueue('q', '{}', run_at => 'infinity')", "22023", "run_at");
        run("SET LOCAL pg_jobqueue.max_payload_bytes = 100");
        assert_refused("SELECT jq_enqueue('q', jsonb_build_object('x', repeat('a', 200)))", "22023", "payload");
        assert!(error_of("SELECT jq_enqueue('q', jsonb_build_object('x', repeat('a', 50)))") == "no error");
        assert_eq!(error_of(&format!("SELECT jq_enqueue('{}', '{{}}')", "q".repeat(60))), "no error");
        assert_eq!(error_of("SELECT jq_enqueue('a-Z_0.9:x', '{}')"), "no error");
    }

    #[pg_test]
    fn bad_batch_arguments_are_refused() {
        assert_refused("SELECT jq_enqueue_batch('q', NULL)", "22004", "payloads");
        assert_refused("SELECT jq_enqueue_batch('q', ARRAY['{}', NULL]::jsonb[])", "22004", "payloads[2]");
        assert_refused("SELECT jq_enqueue_batch(NULL, ARRAY['{}']::jsonb[])", "22004", "queue_name");
        assert_refused("SELECT jq_enqueue_batch('q', ARRAY['{}']::jsonb[], max_attempts => -1)", "22023", "max_attempts");
        run("SET LOCAL pg_jobqueue.max_payload_bytes = 100");
        assert_refused(
            "SELECT jq_enqueue_batch('q', ARRAY['{}', jsonb_build_object('x', repeat('a', 200))])",
            "22023",
            "payloads[2]",
        );
    }

    #[pg_test]
    fn bad_claim_arguments_are_refused() {
        enqueue("q");
        assert_refused("SELECT jq_claim(NULL, 'w')", "22004", "queue_name");
        assert_refused("SELECT jq_claim('q', NULL)", "22004", "worker");
        assert_refused("SELECT jq_claim('q', '')", "22023", "worker");
        assert_refused("SELECT jq_claim('q', repeat('w', 201))", "22023", "worker");
        assert_refused("SELECT jq_claim('q', 'w', interval '0 s')", "22023", "lease");
        assert_refused("SELECT jq_claim('q', 'w', interval '-5 s')", "22023", "lease");
        assert_refused("SELECT jq_claim('q', 'w', interval '2 days')", "22023", "lease");
        assert_refused("SELECT jq_claim('q', 'w', batch_size => 0)", "22023", "batch_size");
        assert_refused("SELECT jq_claim('q', 'w', batch_size => 1001)", "22023", "batch_size");
        assert_refused("SELECT jq_claim('q', 'w', batch_size => NULL)", "22004", "batch_size");
        assert_refused("SELECT jq_claim('q', 'w', wait => interval '-1 s')", "22023", "wait");
        assert_refused("SELECT jq_claim('q', 'w', wait => interval '301 s')", "22023", "pg_jobqueue.max_wait");
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_jobs WHERE status = 'running'"), 0);
    }

    #[pg_test]
    fn a_waiting_claim_returns_a_job_when_its_run_at_comes() {
        let id = one::<i64>("SELECT jq_enqueue('q', '{}', run_at => clock_timestamp() + interval '300 ms')");
        let (claimed, due) = Spi::get_two::<i64, bool>(
            "SELECT c.id, clock_timestamp() >= j.available_at
             FROM jq_claim('q', 'w', wait => interval '20 s') c JOIN jq_jobs j USING (id)",
        )
        .unwrap();
        assert_eq!(claimed, Some(id));
        assert_eq!(due, Some(true), "claimed before its run_at");
    }

    #[pg_test]
    fn a_waiting_claim_with_nothing_to_claim_returns_no_rows_after_its_wait() {
        let elapsed = one::<bool>(
            "WITH t0 AS MATERIALIZED (SELECT clock_timestamp() AS at),
                  c AS MATERIALIZED (SELECT count(*) AS n FROM jq_claim('q', 'w', wait => interval '300 ms'))
             SELECT c.n = 0 AND clock_timestamp() - t0.at >= interval '300 ms' FROM t0, c",
        );
        assert!(elapsed, "returned a job, or returned before its wait was over");
        // Zero means no wait: a plain claim.
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_claim('q', 'w', wait => interval '0')"), 0);
    }

    #[pg_test]
    fn bad_lease_holder_arguments_are_refused() {
        let id = enqueue("q");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        let before = row_text(id);
        assert_refused(&format!("SELECT jq_heartbeat({id}, 'w', {token}, interval '0 s')"), "22023", "extend");
        assert_refused(&format!("SELECT jq_heartbeat({id}, 'w', {token}, interval '25 hours')"), "22023", "extend");
        assert_refused(&format!("SELECT jq_heartbeat(NULL, 'w', {token})"), "22004", "job_id");
        assert_refused(&format!("SELECT jq_complete({id}, NULL, {token})"), "22004", "worker");
        assert_refused(&format!("SELECT jq_complete({id}, 'w', NULL)"), "22004", "lease_token");
        assert_refused(&format!("SELECT jq_fail({id}, 'w', {token}, NULL)"), "22004", "error_code");
        assert_refused(&format!("SELECT jq_fail({id}, 'w', {token}, '')"), "22023", "error_code");
        assert_refused(&format!("SELECT jq_fail({id}, 'w', {token}, 'E', retry_in => interval '-1 s')"), "22023", "retry_in");
        assert_refused("SELECT jq_reap(0)", "22023", "max_jobs");
        assert_refused("SELECT jq_prune(0)", "22023", "max_jobs");
        assert_refused("SELECT jq_retry_dead(NULL)", "22004", "queue_name");
        assert_refused("SELECT jq_purge_dead('q', max_jobs => -1)", "22023", "max_jobs");
        assert_refused("SELECT jq_retry(NULL)", "22004", "job_id");
        assert_refused("SELECT jq_cancel(NULL)", "22004", "job_id");
        assert_eq!(row_text(id), before);
    }

    #[pg_test]
    fn only_a_superuser_can_change_a_limit() {
        assert_eq!(error_of("SET LOCAL pg_jobqueue.max_batch_size = 5000"), "no error");
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_claim('q', 'w', batch_size => 5000)"), 0);
        run("CREATE ROLE jq_test_client");
        for setting in ["max_batch_size", "max_lease", "max_payload_bytes"] {
            assert!(!one::<bool>(&format!(
                "SELECT has_parameter_privilege('jq_test_client', 'pg_jobqueue.{setting}', 'SET')"
            )));
        }
    }

    /// The plan test: with a history of finished jobs and a backlog of pending ones, the claim and the
    /// reaper read their partial indexes, never scan jq_jobs sequentially and never sort; the stats
    /// view and retention do not scan the table either.
    #[pg_test]
    fn claim_and_reap_plans_use_their_partial_indexes() {
        add_history_and_backlog();
        run("SELECT count(*) FROM jq_claim('q1', 'w', interval '1 s', 50)");
        run("ANALYZE jq_jobs");

        let now = crate::clock::now();
        let claim_plan = |batch: i32, admitted: bool| {
            let args = ["q2".into(), "w".into(), Option::<pgrx::datum::Interval>::None.into(), batch.into(), now.into(), admitted.into()];
            Spi::explain_with_args(include_str!("../sql/queries/claim.sql"), &args).unwrap().0
        };
        for (batch, admitted) in [(1, false), (100, false), (100, true)] {
            let plan = claim_plan(batch, admitted);
            assert_no_sort_and_no_seq_scan(&plan);
            for index in ["jq_jobs_claim", "jq_jobs_fifo"] {
                assert_reads_index(&plan, index);
            }
            assert_has_node(&plan, "Tid Scan");
        }
        // A batch near the size of a small queue may fetch its candidates and sort them, which is
        // cheap there; what must hold at every size is that the UPDATE finds its rows by ctid.
        let plan = claim_plan(1000, true);
        assert_no_seq_scan(&plan);
        assert_has_node(&plan, "Tid Scan");

        let reap_plan =
            Spi::explain_with_args(include_str!("../sql/queries/reap.sql"), &[
                10000i32.into(),
                now.into(),
                Option::<&str>::None.into(),
                Vec::<i64>::new().into(),
                Option::<i64>::None.into(),
            ])
                .unwrap();
        assert_no_sort_and_no_seq_scan(&reap_plan.0);
        assert_reads_index(&reap_plan.0, "jq_jobs_running");

        // Operators' reads and retention grow with live work, not with the succeeded history.
        let stats_plan = Spi::explain("SELECT * FROM jq_queue_stats").unwrap();
        assert_no_seq_scan(&stats_plan.0);
        let cutoff = Spi::get_one_with_args::<pgrx::datum::TimestampWithTimeZone>(
            include_str!("../sql/queries/prune_cutoff.sql"),
            &[now.into()],
        )
        .unwrap();
        let prune_plan = Spi::explain_with_args(
            include_str!("../sql/queries/prune.sql"),
            &[10000i32.into(), now.into(), cutoff.into()],
        )
        .unwrap();
        assert_no_seq_scan(&prune_plan.0);
        assert_reads_index(&prune_plan.0, "jq_jobs_finished");
    }

    /// The statements that run with session-long generic plans (plans.rs) keep their access paths in
    /// those plans, whether the plan was made on an empty, never analyzed table (where a sequential
    /// scan is cheapest, and the plan outlives that moment) or on a large one.
    #[pg_test]
    fn generic_plans_use_their_indexes() {
        // What plans.rs sets while it plans and runs them.
        run("SET LOCAL plan_cache_mode = force_generic_plan");
        run("SET LOCAL enable_seqscan = off");
        assert_generic_plans_use_indexes();
        add_history_and_backlog();
        run("INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('q3', 10)");
        // Statistics taken while nothing ran, then many running jobs: the case where the index of
        // running jobs looks empty to the planner but is not.
        run("ANALYZE jq_jobs");
        run("SELECT count(*) FROM jq_claim('q2', 'w', interval '1 hour', 1000)");
        assert_generic_plans_use_indexes();
    }

    fn assert_generic_plans_use_indexes() {
        for batch in [1, 1000] {
            let claim = generic_plan(
                include_str!("../sql/queries/claim.sql"),
                "text, text, interval, int, timestamptz, boolean",
                &format!("'q1', 'w', NULL, {batch}, now(), false"),
            );
            assert_no_sort_and_no_seq_scan(&claim);
            assert_reads_index(&claim, "jq_jobs_claim");
            assert_reads_index(&claim, "jq_jobs_fifo");
            assert_has_node(&claim, "Tid Scan");
        }
        let running = generic_plan(include_str!("../sql/queries/claim_running.sql"), "text", "'q3'");
        assert_no_seq_scan(&running);
        // What a waiting claim runs between its looks.
        let next_due = generic_plan(include_str!("../sql/queries/claim_next_due.sql"), "text, timestamptz", "'q1', now()");
        assert_no_seq_scan(&next_due);
        assert_reads_index(&next_due, "jq_jobs_fifo");
        let slot_free = generic_plan(include_str!("../sql/queries/claim_slot_free.sql"), "text, timestamptz", "'q3', now()");
        assert_no_seq_scan(&slot_free);
        let holder = generic_plan(include_str!("../sql/queries/enqueue_existing.sql"), "text, text", "'q1', 'k'");
        assert_no_seq_scan(&holder);
        // Refused calls look up their job's queue, to count the refusal.
        let job_queue = generic_plan(include_str!("../sql/queries/job_queue.sql"), "bigint[]", "ARRAY[1]");
        assert_no_seq_scan(&job_queue);
        assert_reads_index(&job_queue, "jq_jobs_pkey");
        let by_id = [
            (include_str!("../sql/queries/complete.sql"), "bigint, text, bigint, timestamptz", "1, 'w', 1, now()"),
            (
                include_str!("../sql/queries/complete_batch.sql"),
                "bigint[], text, bigint[], timestamptz, text",
                "ARRAY[1, 2], 'w', ARRAY[1, 1], now(), 'running'",
            ),
            (include_str!("../sql/queries/heartbeat.sql"), "bigint, text, bigint, interval, timestamptz", "1, 'w', 1, NULL, now()"),
            (
                include_str!("../sql/queries/fail.sql"),
                "bigint, text, bigint, text, text, boolean, interval, timestamptz",
                "1, 'w', 1, 'E', NULL, true, NULL, now()",
            ),
        ];
        let redrive = [
            (include_str!("../sql/queries/retry.sql"), "bigint, timestamptz", "1, now()"),
            (include_str!("../sql/queries/cancel.sql"), "bigint, timestamptz", "1, now()"),
        ];
        for (sql, types, args) in redrive {
            let plan = generic_plan(sql, types, args);
            assert_no_seq_scan(&plan);
            assert!(!plan_nodes(&plan).iter().any(|n| n["Index Name"] == "jq_jobs_unresolved"), "{plan}");
        }
        for (sql, types, args) in by_id {
            let plan = generic_plan(sql, types, args);
            assert_no_seq_scan(&plan);
            assert_reads_index(&plan, "jq_jobs_pkey");
            assert!(!plan_nodes(&plan).iter().any(|n| n["Index Name"] == "jq_jobs_running"), "{plan}");
        }
        for (sql, dedup_key) in [
            (include_str!("../sql/queries/enqueue.sql"), "NULL"),
            (include_str!("../sql/queries/enqueue_dedup.sql"), "'k'"),
        ] {
            let enqueue = generic_plan(
                sql,
                "text, jsonb, int, timestamptz, int, text, text, timestamptz",
                &format!("'q1', '{{}}', 0, NULL, NULL, {dedup_key}, NULL, now()"),
            );
            assert_no_seq_scan(&enqueue);
        }
    }

    /// The generic plan PostgreSQL makes for `sql` prepared with parameters of `types`.
    fn generic_plan(sql: &str, types: &str, args: &str) -> serde_json::Value {
        run(&format!("PREPARE jq_plan_test ({types}) AS {sql}"));
        let plan = Spi::explain(&format!("EXECUTE jq_plan_test ({args})")).unwrap().0;
        run("DEALLOCATE jq_plan_test");
        plan
    }

    fn assert_has_node(plan: &serde_json::Value, node_type: &str) {
        assert!(plan_nodes(plan).iter().any(|n| n["Node Type"] == node_type), "the plan has no {node_type}: {plan}");
    }

    /// 100k succeeded jobs and 10k pending ones (five priorities, a second apart) over four queues.
    fn add_history_and_backlog() {
        run("INSERT INTO jq_jobs (queue_name, payload, status, available_at, max_attempts, created_at, finished_at, attempt_count)
             SELECT 'q' || (i % 4), '{}', 'succeeded', now(), 8, now(), now(), 1 FROM generate_series(1, 100000) i");
        run("INSERT INTO jq_jobs (queue_name, payload, priority, available_at, max_attempts, created_at)
             SELECT 'q' || (i % 4), '{}', i % 5, now() - (i || ' s')::interval, 8, now() FROM generate_series(1, 10000) i");
    }

    fn plan_nodes(plan: &serde_json::Value) -> Vec<&serde_json::Value> {
        let mut nodes = Vec::new();
        collect_plan_nodes(plan, &mut nodes);
        nodes
    }

    fn assert_no_seq_scan(plan: &serde_json::Value) {
        for node in plan_nodes(plan) {
            let scans_jobs = node["Node Type"] == "Seq Scan" && node["Relation Name"] == "jq_jobs";
            assert!(!scans_jobs, "the plan scans jq_jobs sequentially: {plan}");
        }
    }

    fn assert_no_sort_and_no_seq_scan(plan: &serde_json::Value) {
        assert_no_seq_scan(plan);
        assert!(plan_nodes(plan).iter().all(|n| n["Node Type"] != "Sort"), "the plan sorts: {plan}");
    }

    fn assert_reads_index(plan: &serde_json::Value, index: &str) {
        assert!(
            plan_nodes(plan).iter().any(|n| n["Index Name"] == index),
            "the plan does not read {index}: {plan}"
        );
    }

    fn collect_plan_nodes<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        match value {
            serde_json::Value::Object(map) => {
                if map.contains_key("Node Type") {
                    out.push(value);
                }
                map.values().for_each(|v| collect_plan_nodes(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| collect_plan_nodes(v, out)),
            _ => {}
        }
    }
}
