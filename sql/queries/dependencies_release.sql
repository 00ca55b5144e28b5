-- $1 the jobs that just succeeded (bigint[]), $2 now
-- Each pending job waiting on one of them waits for one dependency fewer; one that waits for none
-- is claimable from now (guide, "Workflows"), in the claim order of its priority and of when it
-- became claimable, which its `available_at` says from now on (a later run_at stays).
-- Two dependencies completing at once both update the job's row: the second waits for the first
-- and re-reads the row (READ COMMITTED), so exactly one of them brings it to zero. A job waiting on
-- two of the jobs completed here is counted down twice, once per row of jq_job_dependencies.
WITH waiting AS (
    SELECT d.job_id, pg_catalog.count(*)::int AS done
    FROM jq_job_dependencies d
    WHERE d.depends_on = ANY ($1)
    GROUP BY d.job_id
)
UPDATE jq_live_jobs j
SET awaiting = j.awaiting - w.done,
    available_at = CASE WHEN j.awaiting - w.done = 0 THEN greatest(j.available_at, $2) ELSE j.available_at END
FROM waiting w
WHERE j.id = w.job_id
  AND j.status OPERATOR(pg_catalog.=) 'pending'
  AND j.awaiting > 0
RETURNING j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id) AS queue_name,
          j.awaiting = 0 AS released, j.priority, j.available_at, j.ordering_key IS NOT NULL AS ordered,
          j.concurrency_key IS NOT NULL AS keyed
