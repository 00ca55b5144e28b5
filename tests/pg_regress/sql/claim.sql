-- jq_claim: every bad argument of the README's section "jq_claim" and of the common argument rules
-- of "Functions", refused with its SQLSTATE and a message naming the argument, claiming nothing;
-- the wait's 0A000 and 57014; and the edge values that are accepted.
\set SHOW_CONTEXT never
-- Start from empty tables and job ids from 1, whatever the files before this one left.
TRUNCATE jq_job_events, jq_live_jobs, jq_job_history, jq_queues;
ALTER SEQUENCE jq_jobs_id_seq RESTART;
ALTER SEQUENCE jq_job_events_id_seq RESTART;

-- One claimable job, so that a refused claim would have had something to take.
SELECT jq_enqueue('q', '{}');

-- 22004 for a NULL queue_name, worker or batch_size.
SELECT jq_claim(NULL, 'w');
\echo :SQLSTATE
SELECT jq_claim('q', NULL);
\echo :SQLSTATE
SELECT jq_claim('q', 'w', batch_size => NULL);
\echo :SQLSTATE

-- 22023 for a bad queue name; a worker that is empty or over 200 characters.
SELECT jq_claim('bad name', 'w');
\echo :SQLSTATE
SELECT jq_claim('q', '');
\echo :SQLSTATE
SELECT jq_claim('q', repeat('w', 201));
\echo :SQLSTATE

-- 22023 for a lease that is zero, negative or over pg_jobqueue.max_lease (1 day by default).
SELECT jq_claim('q', 'w', interval '0 s');
\echo :SQLSTATE
SELECT jq_claim('q', 'w', interval '-5 s');
\echo :SQLSTATE
SELECT jq_claim('q', 'w', interval '2 days');
\echo :SQLSTATE

-- 22023 for a batch_size outside 1..pg_jobqueue.max_batch_size (1000 by default).
SELECT jq_claim('q', 'w', batch_size => 0);
\echo :SQLSTATE
SELECT jq_claim('q', 'w', batch_size => 1001);
\echo :SQLSTATE

-- 22023 for a wait that is negative or over pg_jobqueue.max_wait (5 minutes by default).
SELECT jq_claim('q', 'w', wait => interval '-1 s');
\echo :SQLSTATE
SELECT jq_claim('q', 'w', wait => interval '301 s');
\echo :SQLSTATE

-- Security, "Nothing one job, setting or role does stops the queue": an interval argument is judged
-- by what adding it to the clock adds, and none whose parts reach past 100 years is added at all.
SELECT count(*) FROM jq_claim('q', 'w', interval '178000000 years');
\echo :SQLSTATE
SELECT count(*) FROM jq_claim('q', 'w', wait => interval '2147483647 days');
\echo :SQLSTATE

-- interval '1 mon -30 days 23:59:59' compares as less than a day, but what it adds depends on the
-- length of the current month: about two days, about one, or less than nothing. Whichever it is
-- today, the claim must agree with what it adds: claim the job when that is within (0, 1 day], and
-- refuse the lease with 22023 otherwise. Rolled back, so the job stays unclaimed either way.
BEGIN;
SET LOCAL TimeZone = 'UTC';
CREATE FUNCTION pg_temp.claim_agrees_with_what_it_adds(lease interval) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    adds interval := clock_timestamp() + lease - clock_timestamp();
    within boolean := adds > interval '0' AND adds <= interval '1 day';
    claimed bigint;
BEGIN
    SELECT count(*) INTO claimed FROM jq_claim('q', 'w', lease);
    RETURN within AND claimed = 1;
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN NOT within AND SQLERRM LIKE 'lease %';
END
$$;
SELECT pg_temp.claim_agrees_with_what_it_adds(interval '1 mon -30 days 23:59:59') AS agrees;
ROLLBACK;

-- 0A000 for a wait in REPEATABLE READ or SERIALIZABLE: its snapshot would never show a new job.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM jq_claim('q', 'w', wait => interval '1 s');
\echo :SQLSTATE
ROLLBACK;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT count(*) FROM jq_claim('q', 'w', wait => interval '1 s');
\echo :SQLSTATE
ROLLBACK;

-- A wait ends early with 57014 on statement_timeout (here on a queue with nothing to claim).
SET statement_timeout = '200ms';
SELECT count(*) FROM jq_claim('empty', 'w', wait => interval '1 min');
\echo :SQLSTATE
RESET statement_timeout;

-- None of them claimed or wrote anything: the job is pending as enqueued, never claimed.
SELECT id, status, attempt_count, lease_token, lease_owner FROM jq_jobs;
SELECT count(*) AS events FROM jq_job_events;

-- Accepted edges. A 200-character worker:
SELECT id, attempt_count, lease_token FROM jq_claim('q', repeat('w', 200));
-- a lease of exactly pg_jobqueue.max_lease (24 hours, not '1 day', which adds 23 or 25 hours on a
-- day the clocks change):
SELECT jq_enqueue('q', '{}');
SELECT id, lease_expires_at - clock_timestamp() > interval '23 hours' AS about_a_day
FROM jq_claim('q', 'w', interval '24 hours');
-- a batch_size of exactly pg_jobqueue.max_batch_size:
SELECT jq_enqueue('q', '{}');
SELECT id FROM jq_claim('q', 'w', batch_size => 1000);
-- a wait of exactly pg_jobqueue.max_wait, which returns at once when a job is claimable:
SELECT jq_enqueue('q', '{}');
SELECT id FROM jq_claim('q', 'w', wait => interval '5 minutes');
-- and a wait of zero, which means no wait (so it is allowed in REPEATABLE READ, too):
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM jq_claim('q', 'w', wait => interval '0');
COMMIT;
-- 0A000 for a claim of keyed jobs under a key limit outside READ COMMITTED, whose running count
-- would be read in a snapshot older than the key's lock (guide, "Flow control"); without a key
-- limit the keys are taken in turn there as well.
SELECT jq_configure('keyed', '{"key_concurrency_limit": 1}') IS NOT NULL AS configured;
SELECT jq_enqueue('keyed', '{}', concurrency_key => 'a');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT id FROM jq_claim('keyed', 'w');
\echo :SQLSTATE
ROLLBACK;
SELECT jq_configure('keyed', '{"key_concurrency_limit": null}') IS NOT NULL AS configured;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT id FROM jq_claim('keyed', 'w');
COMMIT;
-- And for a queue with a rate limit, whatever its jobs.
SELECT jq_configure('rated', '{"rate_limit": 5, "rate_period": "1 minute"}') IS NOT NULL AS configured;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT id FROM jq_claim('rated', 'w');
\echo :SQLSTATE
ROLLBACK;
SELECT id, status, lease_owner = 'w' AS by_w FROM jq_jobs ORDER BY id;
