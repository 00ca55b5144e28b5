-- Workflows (guide, "Workflows"): every bad `depends_on` of jq_enqueue and jq_enqueue_batch,
-- refused with 22023 naming the argument and writing nothing (no job, no row of
-- jq_job_dependencies, no dependency marked); and 42501 for a dependency of a queue the caller
-- has no right on, also writing nothing.
\set SHOW_CONTEXT never
-- Start from empty tables, no grants, and job ids from 1, whatever the files before this one left.
TRUNCATE jq_job_events, jq_live_jobs, jq_job_history, jq_queues, jq_job_dependencies;
DELETE FROM jq_grants;
ALTER SEQUENCE jq_jobs_id_seq RESTART;
ALTER SEQUENCE jq_job_events_id_seq RESTART;

-- Job 1 of 'fetch' and job 2 of 'payroll', pending.
SELECT jq_enqueue('fetch', '{}'), jq_enqueue('payroll', '{}');

-- 22023: an id that names no job, a NULL element, an id twice.
SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[1, 999]);
\echo :SQLSTATE
SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[1, NULL]);
\echo :SQLSTATE
SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[1, 1]);
\echo :SQLSTATE
SELECT jq_enqueue_batch('merge', ARRAY['{}']::jsonb[], depends_on => ARRAY[998]);
\echo :SQLSTATE
-- More than pg_jobqueue.max_batch_size ids.
SET pg_jobqueue.max_batch_size = 2;
SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[1, 2, 3]);
\echo :SQLSTATE
RESET pg_jobqueue.max_batch_size;

-- NULL and an empty array: no dependencies.
SELECT jq_enqueue('merge', '{}', depends_on => NULL) AS free_1, jq_enqueue('merge', '{}', depends_on => '{}') AS free_2;
SELECT id, awaiting, depends_on FROM jq_jobs WHERE queue_name = 'merge' ORDER BY id;

-- 42501: enqueue on the job's queue is not enough; each dependency's queue needs a right too.
CREATE ROLE regress_jq_producer;
SELECT jq_grant('regress_jq_producer', 'merge', 'enqueue'), jq_grant('regress_jq_producer', 'fetch', 'monitor');
SET ROLE regress_jq_producer;
SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[1, 2]);
\echo :SQLSTATE
-- With a right on every dependency's queue, the job is held.
SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[1]) AS held;
RESET ROLE;

-- Nothing was written by the refused calls: four jobs of 'merge' would be there otherwise, and the
-- refused dependencies would be marked.
SELECT l.id, l.status, l.awaiting, l.depends_on, l.dependents FROM jq_live_jobs l ORDER BY l.id;
SELECT depends_on, job_id FROM jq_job_dependencies ORDER BY 1, 2;

SELECT jq_revoke('regress_jq_producer', 'merge', 'enqueue'), jq_revoke('regress_jq_producer', 'fetch', 'monitor');
DROP OWNED BY regress_jq_producer;
DROP ROLE regress_jq_producer;
