-- $1 job_id, $2 worker, $3 lease_token, $4 extend (NULL: the claimed lease length), $5 now
-- Changes only lease_expires_at, which no index covers: a HOT update.
UPDATE jq_jobs
SET lease_expires_at = least($5 + coalesce($4, lease_length), run_deadline)
WHERE id = $1
  AND status = 'running'
  AND lease_owner = $2
  AND lease_token = $3
  AND lease_expires_at > $5
