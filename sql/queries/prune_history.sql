-- $1 max_jobs, $2 now
-- Deletes, row by row, up to $1 succeeded jobs past their queue's retention that no whole day could
-- take with it: those of a queue that keeps them less long than another queue of the same day, and
-- those of jq_job_history_default. In no particular order (each one is past its retention), so the
-- scan stops at $1 rows instead of sorting a backlog; the queues are found by a skip scan of each
-- partition's index by queue. Their events go with them.
WITH RECURSIVE held AS (
    SELECT pg_catalog.min(h.queue_id) AS queue_id FROM jq_job_history h
    UNION ALL
    SELECT (SELECT pg_catalog.min(h.queue_id) FROM jq_job_history h WHERE h.queue_id > held.queue_id)
    FROM held
    WHERE held.queue_id IS NOT NULL
), picked AS (
    SELECT p.id
    FROM held
    JOIN jq_queue_ids n ON n.queue_id = held.queue_id
    LEFT JOIN jq_queues q ON q.queue_name = n.queue_name
    CROSS JOIN LATERAL (
        SELECT h.id
        FROM jq_job_history h
        WHERE h.queue_id = held.queue_id
          AND h.finished_at < $2 - CASE WHEN q.queue_name IS NULL THEN interval '7 days' ELSE q.retention END
          -- Not while a pending or running job depends on it (guide, "Workflows").
          AND NOT EXISTS (
              SELECT 1 FROM jq_job_dependencies x JOIN jq_live_jobs c ON c.id = x.job_id
              WHERE x.depends_on = h.id
                AND c.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[]))
        LIMIT $1
    ) AS p
    LIMIT $1
), pruned AS (
    DELETE FROM jq_job_history h WHERE h.id = ANY (ARRAY(SELECT id FROM picked)) RETURNING h.id
), events AS (
    DELETE FROM jq_job_events e WHERE e.job_id = ANY (ARRAY(SELECT id FROM pruned))
)
SELECT id FROM pruned
