-- $1 job_id, $2 worker, $3 lease_token, $4 progress, $5 now, $6 the text 'running'
-- A progress report is kept with the job, across retries, and renews the lease as a heartbeat
-- without `extend` does (guide, "Progress and checkpoints"). Neither column is in an index: a
-- HOT update. The row is found as in heartbeat.sql, by its primary key alone, with the status
-- compared with a parameter.
UPDATE jq_live_jobs
SET progress = $4,
    lease_expires_at = least($5 + lease_length, run_deadline)
WHERE id = $1
  AND status OPERATOR(pg_catalog.=) $6::jq_status
  AND lease_owner = $2
  AND lease_token = $3
  AND lease_expires_at > $5
RETURNING (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = jq_live_jobs.queue_id)
