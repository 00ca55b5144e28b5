-- $1 job_id, $2 worker, $3 lease_token, $4 now
-- The row is found by its primary key alone: the ctid of the visible version, then a TID scan. With
-- `id = $1 AND status = 'running'` only, the planner may walk the whole index of running jobs
-- instead, whenever statistics say few jobs run (the bench saw 0.5 ms per call with 2,000 running).
-- The guard is still checked on the row's newest version: a row updated since the subquery's
-- snapshot is re-read and re-checked (EvalPlanQual), as with any UPDATE.
UPDATE jq_jobs
SET status = 'succeeded',
    lease_owner = NULL,
    lease_expires_at = NULL,
    finished_at = $4
WHERE ctid = (SELECT ctid FROM jq_jobs WHERE id = $1)
  AND id = $1
  AND status OPERATOR(pg_catalog.=) 'running'
  AND lease_owner = $2
  AND lease_token = $3
  AND lease_expires_at > $4
-- For the counters: the queue, and the claim time its running time is measured from.
RETURNING queue_name, claimed_at
