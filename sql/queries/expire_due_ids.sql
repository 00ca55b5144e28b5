-- $1 max_jobs, $2 now, $3 queue_name (NULL: every queue), $4 jobs to skip
-- The expired pending jobs a failed expiry statement would have cancelled, to be cancelled one by
-- one (src/api/reap.rs).
SELECT j.id
FROM jq_live_jobs j
WHERE j.status OPERATOR(pg_catalog.=) 'pending'
  AND j.expires_at IS NOT NULL
  AND j.expires_at <= $2
  AND ($3::text IS NULL OR j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $3))
  AND j.id <> ALL ($4::bigint[])
ORDER BY j.id
LIMIT $1
