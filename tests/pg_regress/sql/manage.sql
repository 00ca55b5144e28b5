-- The operator's and the maintenance calls: jq_retry, jq_cancel, jq_purge, jq_retry_dead,
-- jq_purge_dead, jq_reap and jq_prune. Every bad argument their README sections name is refused
-- with its SQLSTATE and a message naming the argument, and changes no job; a re-drive that would
-- take a dedup key a newer job holds fails with 23505; a job in the wrong state, or an unknown id,
-- is answered false.
\set SHOW_CONTEXT never
-- Start from empty tables and job ids from 1, whatever the files before this one left.
TRUNCATE jq_job_events, jq_live_jobs, jq_job_history, jq_queues;
ALTER SEQUENCE jq_jobs_id_seq RESTART;
ALTER SEQUENCE jq_job_events_id_seq RESTART;

-- Job 1 holds dedup key 'k' and dies; job 2 then takes the freed key and runs; job 3 succeeds;
-- job 4 is pending.
SELECT jq_enqueue('q', '{}', dedup_key => 'k');
SELECT id, lease_token FROM jq_claim('q', 'w', interval '10 min');
SELECT jq_fail(1, 'w', 1, 'E_BAD', retryable => false);
SELECT jq_enqueue('q', '{}', dedup_key => 'k');
SELECT id, lease_token FROM jq_claim('q', 'w', interval '10 min');
SELECT jq_enqueue('q', '{}');
SELECT id, lease_token FROM jq_claim('q', 'w', interval '10 min');
SELECT jq_complete(3, 'w', 1);
SELECT jq_enqueue('q', '{}');
SELECT string_agg(j::text, ' | ' ORDER BY id) AS jobs_before FROM jq_jobs j \gset
SELECT id, status, dedup_key FROM jq_jobs ORDER BY id;

-- jq_retry, jq_cancel and jq_purge, "Errors": 22004 for a NULL job_id.
SELECT jq_retry(NULL);
\echo :SQLSTATE
SELECT jq_cancel(NULL);
\echo :SQLSTATE
SELECT jq_purge(NULL);
\echo :SQLSTATE

-- jq_retry: a job whose dedup_key a newer live job has meanwhile taken cannot be re-driven: 23505,
-- and nothing changes. jq_retry_dead leaves such a job dead, and says it handled none.
SELECT jq_retry(1);
\echo :SQLSTATE
SELECT jq_retry_dead('q') AS redriven;

-- jq_retry_dead and jq_purge_dead, "Errors": 22004 for a NULL queue_name (and a NULL max_jobs);
-- 22023 for a bad queue name or max_jobs < 1.
SELECT jq_retry_dead(NULL);
\echo :SQLSTATE
SELECT jq_retry_dead('q', max_jobs => NULL);
\echo :SQLSTATE
SELECT jq_retry_dead('bad name');
\echo :SQLSTATE
SELECT jq_retry_dead('q', max_jobs => 0);
\echo :SQLSTATE
SELECT jq_purge_dead(NULL);
\echo :SQLSTATE
SELECT jq_purge_dead('q', max_jobs => NULL);
\echo :SQLSTATE
SELECT jq_purge_dead('bad name');
\echo :SQLSTATE
SELECT jq_purge_dead('q', max_jobs => -1);
\echo :SQLSTATE

-- jq_reap, "Errors": 22004 / 22023 for a NULL or non-positive max_jobs; jq_prune the same.
SELECT jq_reap(NULL);
\echo :SQLSTATE
SELECT jq_reap(0);
\echo :SQLSTATE
SELECT jq_reap(-1);
\echo :SQLSTATE
SELECT jq_prune(NULL);
\echo :SQLSTATE
SELECT jq_prune(0);
\echo :SQLSTATE

-- Not one job changed, and the only event is job 1's death.
SELECT string_agg(j::text, ' | ' ORDER BY id) = :'jobs_before' AS unchanged FROM jq_jobs j;
SELECT job_id, event, status, error_code FROM jq_job_events ORDER BY id;

-- A job in another state, or an unknown id, is not an error: false, and nothing changes. jq_retry
-- and jq_purge take only dead or cancelled jobs; jq_cancel only pending or running ones.
SELECT jq_retry(2) AS retry_running, jq_retry(3) AS retry_succeeded, jq_retry(4) AS retry_pending,
       jq_retry(999999) AS retry_unknown;
SELECT jq_cancel(1) AS cancel_dead, jq_cancel(3) AS cancel_succeeded, jq_cancel(999999) AS cancel_unknown;
SELECT jq_purge(2) AS purge_running, jq_purge(3) AS purge_succeeded, jq_purge(4) AS purge_pending,
       jq_purge(999999) AS purge_unknown;
SELECT string_agg(j::text, ' | ' ORDER BY id) = :'jobs_before' AS unchanged FROM jq_jobs j;
-- A cancelled job cannot be cancelled again, and jq_retry re-drives it.
SELECT jq_cancel(4) AS cancelled;
SELECT jq_cancel(4) AS cancelled_again;
SELECT jq_retry(4) AS redriven;
SELECT id, status, attempt_count FROM jq_jobs WHERE id = 4;

-- Accepted: with nothing expired or old enough, the maintenance calls handle nothing.
SELECT jq_reap() AS reaped, jq_reap(1) AS reaped_one, jq_prune() AS pruned, jq_prune(1) AS pruned_one;
SELECT jq_purge_dead('q', 'NO_SUCH_CODE') AS purged;
