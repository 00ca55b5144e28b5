-- $1 job ids (bigint[]), $2 statuses (text[]: dead, cancelled), $3 concurrency or ordering key
-- (NULL: any), $4 error code (NULL: any), $5 created longer ago than this interval (NULL: any).
-- Jobs by id, through the index on id of the live table and of each history partition.
SELECT j.id, j.status::text, j.priority, j.attempt_count, j.max_attempts,
       j.created_at::text, j.available_at::text, j.finished_at::text,
       j.last_error_code, j.concurrency_key, j.queue_name, j.last_error_message,
       extract(epoch FROM j.finished_at)::float8 AS finished_epoch
FROM jq_managed_jobs j
WHERE j.id OPERATOR(pg_catalog.=) ANY ($1::bigint[])
  AND j.status::text OPERATOR(pg_catalog.=) ANY ($2::text[])
  AND ($3::text IS NULL OR j.concurrency_key OPERATOR(pg_catalog.=) $3 OR j.ordering_key OPERATOR(pg_catalog.=) $3)
  AND ($4::text IS NULL OR j.last_error_code OPERATOR(pg_catalog.=) $4)
  AND ($5::text IS NULL OR j.created_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $5::text::interval))
ORDER BY j.id DESC
