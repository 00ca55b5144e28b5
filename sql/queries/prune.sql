-- $1 max_jobs, $2 now, $3 cutoff from prune_cutoff.sql
-- Deletes up to $1 succeeded or cancelled jobs that finished longer ago than their queue's retention
-- (7 days for a queue without a settings row; a NULL retention keeps them), oldest first.
WITH picked AS (
    SELECT j.id
    FROM jq_jobs j
    LEFT JOIN jq_queues q ON q.queue_name = j.queue_name
    WHERE j.status OPERATOR(pg_catalog.=) ANY (ARRAY['succeeded', 'cancelled']::jq_status[])
      AND j.finished_at < $3
      AND j.finished_at < $2 - CASE WHEN q.queue_name IS NULL THEN interval '7 days'
                                    ELSE q.retention END
    ORDER BY j.finished_at
    LIMIT $1
    FOR UPDATE OF j SKIP LOCKED
)
DELETE FROM jq_jobs j
WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
  AND j.status OPERATOR(pg_catalog.=) ANY (ARRAY['succeeded', 'cancelled']::jq_status[])
RETURNING j.id
