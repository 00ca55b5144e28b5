-- $1 queue_name, $2 statuses (text[]: pending, running), $3 concurrency or ordering key (NULL:
-- any), $4 error code (NULL: any), $5 created longer ago than this interval (NULL: any), $6 rows,
-- $7 offset.
-- The queue's pending and running jobs, newest first. jq_managed_jobs is a security_barrier view
-- and enum comparisons are not leakproof, so the status test stays above its row filter; the
-- finished_at test is pushed below it, and prunes the history to its default partition, read
-- through its index: no history is read.
SELECT j.id, j.status::text, j.priority, j.attempt_count, j.max_attempts,
       j.created_at::text, j.available_at::text, j.finished_at::text,
       j.last_error_code, j.concurrency_key, j.lease_owner
FROM jq_managed_jobs j
WHERE j.queue_name OPERATOR(pg_catalog.=) $1
  AND j.finished_at IS NULL
  AND j.status::text OPERATOR(pg_catalog.=) ANY ($2::text[])
  AND ($3::text IS NULL OR j.concurrency_key OPERATOR(pg_catalog.=) $3 OR j.ordering_key OPERATOR(pg_catalog.=) $3)
  AND ($4::text IS NULL OR j.last_error_code OPERATOR(pg_catalog.=) $4)
  AND ($5::text IS NULL OR j.created_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $5::text::interval))
ORDER BY j.id DESC
LIMIT $6 OFFSET $7
