-- $1 queue_name, $2 concurrency or ordering key (NULL: any), $3 last error code (NULL: any), $4
-- created before this time (NULL: any), $5 rows, $6 rows skipped.
-- A queue's succeeded jobs, the latest finished first (guide, "jq_list_jobs"): each day of
-- history read backwards through its index on (queue_id, finished_at), merged, and stopped once the
-- page is full. The days are read for this queue alone, never whole.
SELECT h.id, 'succeeded'::jq_status, h.priority, h.attempt_count, h.max_attempts, h.created_at,
       h.available_at, h.finished_at, h.last_error_code, h.concurrency_key, h.ordering_key,
       NULL::text, false
FROM jq_job_history h
WHERE h.queue_id OPERATOR(pg_catalog.=) (
        SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name OPERATOR(pg_catalog.=) $1)
  AND ($2::text IS NULL OR h.concurrency_key OPERATOR(pg_catalog.=) $2::text
       OR h.ordering_key OPERATOR(pg_catalog.=) $2::text)
  AND ($3::text IS NULL OR h.last_error_code OPERATOR(pg_catalog.=) $3::text)
  AND ($4::timestamptz IS NULL OR h.created_at OPERATOR(pg_catalog.<) $4::timestamptz)
ORDER BY h.finished_at DESC
LIMIT $5 OFFSET $6
