-- Workflows (guide, "Workflows"): every bad `depends_on` of jq_enqueue and jq_enqueue_batch,
-- refused with 22023 naming the argument and writing nothing (no job, no row of
-- jq_job_dependencies); a dependency of a queue where the caller may neither consume nor manage is
-- refused so too, as a job that does not exist.
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

-- Enqueue on the job's queue is not enough: each dependency's queue needs consume or manage. A job
-- of a queue where the caller holds neither (here monitor only on fetch, and nothing on payroll)
-- is refused as one that does not exist, 22023, telling nothing of that queue.
CREATE ROLE regress_jq_producer;
SELECT jq_grant('regress_jq_producer', 'merge', 'enqueue'), jq_grant('regress_jq_producer', 'fetch', 'monitor');
SET ROLE regress_jq_producer;
SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[1]);
\echo :SQLSTATE
SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[2]);
\echo :SQLSTATE
SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[999]);
\echo :SQLSTATE
RESET ROLE;
-- With consume on every dependency's queue, the job is held.
SELECT jq_grant('regress_jq_producer', 'fetch', 'consume');
SET ROLE regress_jq_producer;
SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[1]) AS held;
RESET ROLE;
SELECT jq_revoke('regress_jq_producer', 'fetch', 'consume');

-- Nothing was written by the refused calls: four jobs of 'merge' would be there otherwise, with
-- their rows of jq_job_dependencies.
SELECT l.id, l.status, l.awaiting, l.depends_on FROM jq_live_jobs l ORDER BY l.id;
SELECT depends_on, job_id, settled FROM jq_job_dependencies ORDER BY 1, 2;

SELECT jq_revoke('regress_jq_producer', 'merge', 'enqueue'), jq_revoke('regress_jq_producer', 'fetch', 'monitor');
DROP OWNED BY regress_jq_producer;
DROP ROLE regress_jq_producer;

-- jq_parent_results answers as jq_result does: a role with only monitor on the job's queue may not
-- call it (42501), and a role that may read the job's results sees each input only where it may
-- read that input's queue's results too. Job 5 of 'merge' waits for job 1 of 'fetch'.
CREATE ROLE regress_jq_watcher;
CREATE ROLE regress_jq_merger;
SELECT jq_grant('regress_jq_watcher', 'merge', 'monitor'), jq_grant('regress_jq_merger', 'merge', 'consume');
SET ROLE regress_jq_watcher;
SELECT * FROM jq_parent_results(5);
\echo :SQLSTATE
SET ROLE regress_jq_merger;
SELECT job_id, status FROM jq_parent_results(5);
RESET ROLE;
SELECT jq_grant('regress_jq_merger', 'fetch', 'consume');
SET ROLE regress_jq_merger;
SELECT job_id, status FROM jq_parent_results(5);
RESET ROLE;
SELECT jq_revoke('regress_jq_watcher', 'merge', 'monitor'), jq_revoke('regress_jq_merger', 'merge', 'consume'),
       jq_revoke('regress_jq_merger', 'fetch', 'consume');
DROP OWNED BY regress_jq_watcher;
DROP ROLE regress_jq_watcher;
DROP OWNED BY regress_jq_merger;
DROP ROLE regress_jq_merger;
