-- $1 job_id, $2 worker, $3 lease_token, $4 now
-- The job's queue and last progress report, under jq_progress's guard: only the worker that holds
-- the job now reads it (guide, "Progress and checkpoints").
SELECT (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id), j.progress
FROM jq_live_jobs j
WHERE j.id = $1
  AND j.status OPERATOR(pg_catalog.=) 'running'
  AND j.lease_owner = $2
  AND j.lease_token = $3
  AND j.lease_expires_at > $4
