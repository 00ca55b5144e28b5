-- $1 the jobs that just succeeded and have dependents (bigint[]), $2 now, $3 the jobs that just
-- succeeded and had dependencies (bigint[]), $4 the union of what those depended on (bigint[])
-- A completion's part in workflows, in one statement. The rows of jq_job_dependencies of $3, which
-- leave jq_live_jobs, go, found by their key (depends_on, job_id). And:
-- Each pending job waiting on one of them waits for one dependency fewer; one that waits for none
-- is claimable from now (guide, "Workflows"), in the claim order of its priority and of when it
-- became claimable, which its `available_at` says from now on (a later run_at stays).
-- Two dependencies completing at once both update the job's row: the second waits for the first
-- and re-reads the row (READ COMMITTED), so exactly one of them brings it to zero. A job waiting on
-- two of the jobs completed here is counted down twice, once per row of jq_job_dependencies.
--
-- The rows are locked in the order of their ids before the update: two completions whose jobs
-- have dependents in common would otherwise lock them in whatever order their plans visit them,
-- and could each wait for the other (a deadlock). Every statement here that locks many jobs
-- (dependencies_mark.sql, dependencies_cancel.sql) locks them in that order.
WITH unlinked AS (
    DELETE FROM jq_job_dependencies d
    WHERE d.depends_on = ANY ($4) AND d.job_id = ANY ($3)
), waiting AS (
    SELECT d.job_id, pg_catalog.count(*)::int AS done
    FROM jq_job_dependencies d
    WHERE d.depends_on = ANY ($1)
    GROUP BY d.job_id
), locked AS MATERIALIZED (
    SELECT j.id
    FROM jq_live_jobs j
    WHERE j.id = ANY (ARRAY(SELECT w.job_id FROM waiting w))
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE jq_live_jobs j
SET awaiting = j.awaiting - w.done,
    available_at = CASE WHEN j.awaiting - w.done = 0 THEN greatest(j.available_at, $2) ELSE j.available_at END
FROM waiting w
WHERE j.id = ANY (ARRAY(SELECT l.id FROM locked l))
  AND j.id = w.job_id
  AND j.status OPERATOR(pg_catalog.=) 'pending'
  AND j.awaiting > 0
RETURNING j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id) AS queue_name,
          j.awaiting = 0 AS released, j.priority, j.available_at, j.ordering_key IS NOT NULL AS ordered,
          j.concurrency_key IS NOT NULL AS keyed
