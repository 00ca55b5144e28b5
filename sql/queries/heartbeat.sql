-- $1 job_id, $2 worker, $3 lease_token, $4 extend (NULL: the claimed lease length), $5 now
-- Changes only lease_expires_at, which no index covers: a HOT update.
-- The row is found by its primary key alone: the ctid of the visible version, then a TID scan. With
-- `id = $1 AND status = 'running'` only, the planner may walk the whole index of running jobs
-- instead, whenever statistics say few jobs run (the bench saw 0.5 ms per call with 2,000 running).
-- The guard is still checked on the row's newest version: a row updated since the subquery's
-- snapshot is re-read and re-checked (EvalPlanQual), as with any UPDATE.
UPDATE jq_live_jobs
SET lease_expires_at = least($5 + coalesce($4, lease_length), run_deadline)
WHERE ctid = (SELECT ctid FROM jq_live_jobs WHERE id = $1)
  AND id = $1
  AND status OPERATOR(pg_catalog.=) 'running'
  AND lease_owner = $2
  AND lease_token = $3
  AND lease_expires_at > $5
RETURNING (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = jq_live_jobs.queue_id)
