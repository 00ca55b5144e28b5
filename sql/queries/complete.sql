-- $1 job_id, $2 worker, $3 lease_token, $4 now
UPDATE jq_jobs
SET status = 'succeeded',
    lease_owner = NULL,
    lease_expires_at = NULL,
    finished_at = $4
WHERE id = $1
  AND status = 'running'
  AND lease_owner = $2
  AND lease_token = $3
  AND lease_expires_at > $4
