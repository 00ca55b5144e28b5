-- $1 max_jobs, $2 now, $3 queue_name (NULL: every queue), $4 jobs to skip
-- The expired leases a failed reap statement would have reaped, to be reaped one by one (src/api/reap.rs).
SELECT j.id
FROM jq_live_jobs j
WHERE j.status OPERATOR(pg_catalog.=) 'running'
  AND j.lease_expires_at <= $2
  AND ($3::text IS NULL OR j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $3))
  AND j.id <> ALL ($4::bigint[])
ORDER BY j.id
LIMIT $1
