-- $1 queue_name, $2 status (text: pending, running, dead or cancelled; NULL: all four), $3
-- concurrency or ordering key (NULL: any), $4 last error code (NULL: any), $5 created before this
-- time (NULL: any), $6 rows, $7 rows skipped.
-- A queue's live jobs, newest first (guide, "jq_list_jobs"). Planned for each call's arguments,
-- so the branches of statuses not asked for fall away before the plan runs. Each branch says its
-- partial index's own condition, so that it reads that index for the queue alone: no listing reads
-- the whole table, and none needs an index that every enqueue would pay for. The queue's number is
-- a subquery in each branch, so that it is a value each index scan starts from: as a table joined
-- in (a CTE), the plan may hash it against a scan of every live job.
SELECT j.id, j.status, j.priority, j.attempt_count, j.max_attempts, j.created_at, j.available_at,
       j.finished_at, j.last_error_code, j.concurrency_key, j.ordering_key, j.lease_owner,
       j.awaiting OPERATOR(pg_catalog.>) 0 AS held
FROM (
    SELECT l.* FROM jq_live_jobs l
    WHERE ($2::text IS NULL OR $2::text OPERATOR(pg_catalog.=) 'pending')
      AND l.queue_id OPERATOR(pg_catalog.=) (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name OPERATOR(pg_catalog.=) $1)
      AND l.status OPERATOR(pg_catalog.=) 'pending' AND l.awaiting = 0 AND l.concurrency_key IS NULL
    UNION ALL
    SELECT l.* FROM jq_live_jobs l
    WHERE ($2::text IS NULL OR $2::text OPERATOR(pg_catalog.=) 'pending')
      AND l.queue_id OPERATOR(pg_catalog.=) (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name OPERATOR(pg_catalog.=) $1)
      AND l.status OPERATOR(pg_catalog.=) 'pending' AND l.awaiting = 0 AND l.concurrency_key IS NOT NULL
    UNION ALL
    SELECT l.* FROM jq_live_jobs l
    WHERE ($2::text IS NULL OR $2::text OPERATOR(pg_catalog.=) 'pending')
      AND l.queue_id OPERATOR(pg_catalog.=) (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name OPERATOR(pg_catalog.=) $1)
      AND l.status OPERATOR(pg_catalog.=) 'pending' AND l.awaiting > 0
    UNION ALL
    SELECT l.* FROM jq_live_jobs l
    WHERE ($2::text IS NULL OR $2::text OPERATOR(pg_catalog.=) 'running')
      AND l.queue_id OPERATOR(pg_catalog.=) (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name OPERATOR(pg_catalog.=) $1)
      AND l.status OPERATOR(pg_catalog.=) 'running'
    UNION ALL
    SELECT l.* FROM jq_live_jobs l
    WHERE ($2::text IS NULL OR $2::text OPERATOR(pg_catalog.=) ANY ('{dead,cancelled}'::text[]))
      AND l.queue_id OPERATOR(pg_catalog.=) (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name OPERATOR(pg_catalog.=) $1)
      AND l.status OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'cancelled']::jq_status[])
      AND ($2::text IS NULL OR l.status::text OPERATOR(pg_catalog.=) $2::text)
) AS j
WHERE ($3::text IS NULL OR j.concurrency_key OPERATOR(pg_catalog.=) $3::text
       OR j.ordering_key OPERATOR(pg_catalog.=) $3::text)
  AND ($4::text IS NULL OR j.last_error_code OPERATOR(pg_catalog.=) $4::text)
  AND ($5::timestamptz IS NULL OR j.created_at OPERATOR(pg_catalog.<) $5::timestamptz)
ORDER BY j.id DESC
LIMIT $6 OFFSET $7
