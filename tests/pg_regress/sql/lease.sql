-- The lease holder's calls: jq_heartbeat, jq_complete, jq_complete_batch and jq_fail. Every bad
-- argument of their README sections (and the common argument rules of "Functions") is refused with
-- its SQLSTATE and a message naming the argument, and leaves the running job as it was. An unknown
-- job id is not an error: the guarded functions return false.
\set SHOW_CONTEXT never
-- Start from empty tables and job ids from 1, whatever the files before this one left.
TRUNCATE jq_job_events, jq_live_jobs, jq_job_history, jq_queues;
ALTER SEQUENCE jq_jobs_id_seq RESTART;
ALTER SEQUENCE jq_job_events_id_seq RESTART;

-- One job, claimed by worker 'w': its id and token are right in every call below, so that only the
-- argument under test is wrong.
SELECT jq_enqueue('q', '{}') AS id \gset
SELECT lease_token AS token FROM jq_claim('q', 'w', interval '10 min') \gset
SELECT j::text AS job_before FROM jq_jobs j WHERE id = :id \gset

-- jq_heartbeat, "Errors": 22004 for a NULL job_id, worker or lease_token.
SELECT jq_heartbeat(NULL, 'w', :token);
\echo :SQLSTATE
SELECT jq_heartbeat(:id, NULL, :token);
\echo :SQLSTATE
SELECT jq_heartbeat(:id, 'w', NULL);
\echo :SQLSTATE
-- 22023 for an extend that is zero, negative or over pg_jobqueue.max_lease; and a worker that is
-- empty or over 200 characters.
SELECT jq_heartbeat(:id, 'w', :token, interval '0 s');
\echo :SQLSTATE
SELECT jq_heartbeat(:id, 'w', :token, interval '-1 s');
\echo :SQLSTATE
SELECT jq_heartbeat(:id, 'w', :token, interval '25 hours');
\echo :SQLSTATE
SELECT jq_heartbeat(:id, '', :token);
\echo :SQLSTATE
SELECT jq_heartbeat(:id, repeat('w', 201), :token);
\echo :SQLSTATE

-- jq_complete, "Errors": 22004 for a NULL job_id, worker or lease_token; 22023 for an empty worker
-- (or one over 200 characters).
SELECT jq_complete(NULL, 'w', :token);
\echo :SQLSTATE
SELECT jq_complete(:id, NULL, :token);
\echo :SQLSTATE
SELECT jq_complete(:id, 'w', NULL);
\echo :SQLSTATE
SELECT jq_complete(:id, '', :token);
\echo :SQLSTATE
SELECT jq_complete(:id, repeat('w', 201), :token);
\echo :SQLSTATE

-- jq_complete_batch, "Errors": 22004 for a NULL array, a NULL element (named by its position) or
-- a NULL worker.
SELECT jq_complete_batch(NULL, 'w', ARRAY[:token]::bigint[]);
\echo :SQLSTATE
SELECT jq_complete_batch(ARRAY[:id]::bigint[], 'w', NULL);
\echo :SQLSTATE
SELECT jq_complete_batch(ARRAY[:id]::bigint[], NULL, ARRAY[:token]::bigint[]);
\echo :SQLSTATE
SELECT jq_complete_batch(ARRAY[:id, NULL]::bigint[], 'w', ARRAY[:token, 1]::bigint[]);
\echo :SQLSTATE
SELECT jq_complete_batch(ARRAY[:id]::bigint[], 'w', ARRAY[NULL]::bigint[]);
\echo :SQLSTATE
-- 22023 for arrays of different lengths, more than pg_jobqueue.max_batch_size elements, or an
-- empty worker (or one over 200 characters).
SELECT jq_complete_batch(ARRAY[:id]::bigint[], 'w', ARRAY[:token, 1]::bigint[]);
\echo :SQLSTATE
-- 22023 for an array of two dimensions, which would otherwise be taken as the flat list of its
-- elements.
SELECT jq_complete_batch(ARRAY[[:id, 1], [2, 3]]::bigint[], 'w', ARRAY[:token, 1, 2, 3]::bigint[]);
\echo :SQLSTATE
SELECT jq_complete_batch(ARRAY[:id, 1, 2, 3]::bigint[], 'w', ARRAY[[:token, 1], [2, 3]]::bigint[]);
\echo :SQLSTATE
SELECT jq_complete_batch(ARRAY[:id]::bigint[], 'w', ARRAY[:token]::bigint[], ARRAY[['{}']]::jsonb[]);
\echo :SQLSTATE
SET pg_jobqueue.max_batch_size = 1;
SELECT jq_complete_batch(ARRAY[:id, 1]::bigint[], 'w', ARRAY[:token, 1]::bigint[]);
\echo :SQLSTATE
RESET pg_jobqueue.max_batch_size;
SELECT jq_complete_batch(ARRAY[:id]::bigint[], '', ARRAY[:token]::bigint[]);
\echo :SQLSTATE
SELECT jq_complete_batch(ARRAY[:id]::bigint[], repeat('w', 201), ARRAY[:token]::bigint[]);
\echo :SQLSTATE

-- jq_fail, "Errors": 22004 for a NULL job_id, worker, lease_token, error_code or retryable.
SELECT jq_fail(NULL, 'w', :token, 'E');
\echo :SQLSTATE
SELECT jq_fail(:id, NULL, :token, 'E');
\echo :SQLSTATE
SELECT jq_fail(:id, 'w', NULL, 'E');
\echo :SQLSTATE
SELECT jq_fail(:id, 'w', :token, NULL);
\echo :SQLSTATE
SELECT jq_fail(:id, 'w', :token, 'E', retryable => NULL);
\echo :SQLSTATE
-- 22023 for an empty or over-long (more than 64 characters) error_code, a negative retry_in, or one
-- over pg_jobqueue.max_retry_delay (365 days by default); and a worker that is empty or over 200
-- characters.
SELECT jq_fail(:id, 'w', :token, '');
\echo :SQLSTATE
SELECT jq_fail(:id, 'w', :token, repeat('E', 65));
\echo :SQLSTATE
SELECT jq_fail(:id, 'w', :token, 'E', retry_in => interval '-1 s');
\echo :SQLSTATE
SELECT jq_fail(:id, 'w', :token, 'E', retry_in => interval '100 years');
\echo :SQLSTATE
SELECT jq_fail(:id, '', :token, 'E');
\echo :SQLSTATE
SELECT jq_fail(:id, repeat('w', 201), :token, 'E');
\echo :SQLSTATE

-- Not one of them changed the job (the whole row, lease included, is as it was after the claim),
-- and none wrote an event.
SELECT j::text = :'job_before' AS unchanged, status FROM jq_jobs j WHERE id = :id;
SELECT count(*) AS events FROM jq_job_events;

-- An unknown job id is not an error: each guarded function returns false (or no row).
SELECT jq_heartbeat(999999, 'w', 1) AS heartbeat, jq_complete(999999, 'w', 1) AS complete,
       jq_fail(999999, 'w', 1, 'E') AS fail;
SELECT count(*) AS completed FROM jq_complete_batch(ARRAY[999999]::bigint[], 'w', ARRAY[1]::bigint[]);
-- An empty batch completes nothing.
SELECT count(*) AS completed FROM jq_complete_batch(ARRAY[]::bigint[], 'w', ARRAY[]::bigint[]);

-- Accepted edges of jq_fail: an error_code of exactly 64 characters, and a message over 2,000
-- characters, which is kept cut to 2,000 rather than refused ("jq_fail").
SELECT jq_fail(:id, 'w', :token, repeat('E', 64), repeat('m', 2001)) AS failed;
SELECT status, length(last_error_code) AS code_length, length(last_error_message) AS message_length
FROM jq_jobs WHERE id = :id;
SELECT event, status, attempt, worker, length(error_code) AS code_length,
       length(error_message) AS message_length
FROM jq_job_events WHERE job_id = :id;

-- Tables and views, "jq_jobs": the table's own constraints keep a lease exactly while the job runs
-- and attempt_count within max_attempts, whoever writes the row (here the owner, directly). Terse:
-- the DETAIL would show the failing row, timestamps included.
\set VERBOSITY terse
UPDATE jq_live_jobs SET lease_owner = 'w' WHERE id = :id;
\echo :SQLSTATE
UPDATE jq_live_jobs SET attempt_count = max_attempts + 1 WHERE id = :id;
\echo :SQLSTATE
UPDATE jq_live_jobs SET attempt_count = -1 WHERE id = :id;
\echo :SQLSTATE
UPDATE jq_live_jobs SET max_attempts = 0, attempt_count = 0 WHERE id = :id;
\echo :SQLSTATE
UPDATE jq_live_jobs SET lease_expires_at = now() WHERE id = :id;
\echo :SQLSTATE
-- Running: a lease of both parts, not one of them.
UPDATE jq_live_jobs SET status = 'running' WHERE id = :id;
\echo :SQLSTATE
UPDATE jq_live_jobs SET status = 'running', lease_owner = 'w' WHERE id = :id;
\echo :SQLSTATE
UPDATE jq_live_jobs SET status = 'running', lease_expires_at = now() WHERE id = :id;
\echo :SQLSTATE
\set VERBOSITY default
SELECT status, lease_owner, attempt_count FROM jq_jobs WHERE id = :id;
-- What the constraint allows: a whole lease while running, none after; the budget's bounds.
UPDATE jq_live_jobs SET status = 'running', lease_owner = 'w', lease_expires_at = now(),
                        attempt_count = max_attempts WHERE id = :id;
UPDATE jq_live_jobs SET status = 'dead', lease_owner = NULL, lease_expires_at = NULL,
                        max_attempts = 1, attempt_count = 0 WHERE id = :id;
SELECT status, lease_owner, attempt_count, max_attempts FROM jq_jobs WHERE id = :id;
