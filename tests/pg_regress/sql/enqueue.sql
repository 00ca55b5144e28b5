-- jq_enqueue and jq_enqueue_batch: every bad argument the README's sections "jq_enqueue",
-- "jq_enqueue_batch" and the common argument rules of "Functions" name, refused with its SQLSTATE
-- and a message naming the argument, writing nothing; and the edge values that are accepted.
--
-- Each refused call shows its message (default verbosity: no source locations, which move with the
-- code) and then its SQLSTATE (psql's :SQLSTATE, 00000 had it succeeded).
\set SHOW_CONTEXT never
-- Start from empty tables and job ids from 1, whatever the files before this one left.
TRUNCATE jq_job_events, jq_live_jobs, jq_job_history, jq_queues;
ALTER SEQUENCE jq_jobs_id_seq RESTART;
ALTER SEQUENCE jq_job_events_id_seq RESTART;

-- jq_enqueue, "Errors": 22004 for a NULL queue_name, payload or priority.
SELECT jq_enqueue(NULL, '{}');
\echo :SQLSTATE
SELECT jq_enqueue('q', NULL);
\echo :SQLSTATE
SELECT jq_enqueue('q', '{}', priority => NULL);
\echo :SQLSTATE

-- queue_name: 1-60 characters, only ASCII letters, digits and _ - . : (22023).
SELECT jq_enqueue('', '{}');
\echo :SQLSTATE
SELECT jq_enqueue(repeat('q', 61), '{}');
\echo :SQLSTATE
SELECT jq_enqueue('has space', '{}');
\echo :SQLSTATE
SELECT jq_enqueue('semi;colon', '{}');
\echo :SQLSTATE
SELECT jq_enqueue('café', '{}');
\echo :SQLSTATE

-- max_attempts below 1, and an infinite run_at either way (22023).
SELECT jq_enqueue('q', '{}', max_attempts => 0);
\echo :SQLSTATE
SELECT jq_enqueue('q', '{}', max_attempts => -1);
\echo :SQLSTATE
SELECT jq_enqueue('q', '{}', run_at => 'infinity');
\echo :SQLSTATE
SELECT jq_enqueue('q', '{}', run_at => '-infinity');
\echo :SQLSTATE

-- Dedup and ordering keys are at most 256 characters: a longer one is refused with 22023 (Security,
-- "Nothing one job, setting or role does stops the queue"), not with the index's 54000.
SELECT jq_enqueue('q', '{}', dedup_key => repeat('k', 257));
\echo :SQLSTATE
SELECT jq_enqueue('q', '{}', ordering_key => repeat('k', 257));
\echo :SQLSTATE
SELECT jq_enqueue('q', '{}', dedup_key => repeat('é', 257));
\echo :SQLSTATE
-- A concurrency key likewise, and never empty (guide, "Flow control"), in both enqueues.
SELECT jq_enqueue('q', '{}', concurrency_key => repeat('k', 257));
\echo :SQLSTATE
SELECT jq_enqueue('q', '{}', concurrency_key => '');
\echo :SQLSTATE
SELECT jq_enqueue_batch('q', ARRAY['{}']::jsonb[], concurrency_key => '');
\echo :SQLSTATE

-- An oversized payload (22023), measured against pg_jobqueue.max_payload_bytes.
SET pg_jobqueue.max_payload_bytes = 100;
SELECT jq_enqueue('q', jsonb_build_object('x', repeat('a', 200)));
\echo :SQLSTATE

-- None of the refused calls wrote anything.
SELECT (SELECT count(*) FROM jq_jobs) AS jobs, (SELECT count(*) FROM jq_job_events) AS events;

-- Accepted: a payload within the limit, a 60-character queue name, every character the rule allows,
-- and keys of exactly 256 characters (characters, not bytes: 256 two-byte ones are taken too).
SELECT jq_enqueue('q', jsonb_build_object('x', repeat('a', 50)));
RESET pg_jobqueue.max_payload_bytes;
SELECT jq_enqueue(repeat('q', 60), '{}');
SELECT jq_enqueue('a-Z_0.9:x', '{}');
SELECT jq_enqueue('q', '{}', dedup_key => repeat('k', 256), ordering_key => repeat('k', 256));
SELECT jq_enqueue('q', '{}', dedup_key => repeat('é', 256), ordering_key => repeat('é', 256));
SELECT id, length(queue_name) AS name_length, status, max_attempts, length(dedup_key) AS dedup_length,
       length(ordering_key) AS ordering_length
FROM jq_jobs ORDER BY id;

-- jq_enqueue_batch: 22004 for a NULL array or a NULL element (the message names the element), and
-- for a NULL queue_name or priority.
SELECT jq_enqueue_batch('q', NULL);
\echo :SQLSTATE
SELECT jq_enqueue_batch('q', ARRAY['{}', NULL]::jsonb[]);
\echo :SQLSTATE
SELECT jq_enqueue_batch(NULL, ARRAY['{}']::jsonb[]);
\echo :SQLSTATE
SELECT jq_enqueue_batch('q', ARRAY['{}']::jsonb[], priority => NULL);
\echo :SQLSTATE

-- 22023 for a bad queue name, max_attempts below 1, an infinite run_at.
SELECT jq_enqueue_batch('bad name', ARRAY['{}']::jsonb[]);
\echo :SQLSTATE
SELECT jq_enqueue_batch('q', ARRAY['{}']::jsonb[], max_attempts => -1);
\echo :SQLSTATE
SELECT jq_enqueue_batch('q', ARRAY['{}']::jsonb[], run_at => 'infinity');
\echo :SQLSTATE

-- More than pg_jobqueue.max_batch_size payloads (1000 by default), and an oversized element, named
-- by its position (22023).
SELECT count(*) FROM jq_enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[1001]));
\echo :SQLSTATE
SET pg_jobqueue.max_payload_bytes = 100;
SELECT jq_enqueue_batch('q', ARRAY['{}', jsonb_build_object('x', repeat('a', 200))]);
\echo :SQLSTATE
RESET pg_jobqueue.max_payload_bytes;

-- 22023 for an array of two dimensions (payloads, depends_on), which would otherwise be taken as
-- the flat list of its elements.
SELECT jq_enqueue_batch('q', ARRAY[['{}', '{}'], ['{}', '{}']]::jsonb[]);
\echo :SQLSTATE
SELECT jq_enqueue_batch('q', ARRAY['{}']::jsonb[], depends_on => ARRAY[[1, 2], [3, 4]]::bigint[]);
\echo :SQLSTATE
SELECT jq_enqueue('q', '{}', depends_on => ARRAY[[1], [2]]::bigint[]);
\echo :SQLSTATE

-- Nothing was inserted by any of them: still the five jobs from above.
SELECT (SELECT count(*) FROM jq_jobs) AS jobs, (SELECT count(*) FROM jq_job_events) AS events;

-- Accepted: an empty array inserts nothing; a batch of exactly max_batch_size payloads is taken,
-- one more is not; the ids come back in input order.
SELECT count(*) AS inserted FROM jq_enqueue_batch('q', ARRAY[]::jsonb[]);
SET pg_jobqueue.max_batch_size = 3;
SELECT count(*) FROM jq_enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[4]));
\echo :SQLSTATE
SELECT n, id FROM jq_enqueue_batch('q', ARRAY['{"n": 1}', '{"n": 2}', '{"n": 3}']::jsonb[])
                  WITH ORDINALITY AS b(id, n);
RESET pg_jobqueue.max_batch_size;
SELECT id, payload FROM jq_jobs WHERE id > 5 ORDER BY id;
