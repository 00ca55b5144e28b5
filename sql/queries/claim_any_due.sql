-- $1 queue_name, $2 now
-- Whether the queue has a pending job that is due: what a waiting claim asks before it writes the
-- first token epoch of a server lifetime, so that a look that would claim nothing writes nothing
-- (and need not return to commit it). The oldest pending job of each priority, by a skip scan of
-- the claim index (one probe per priority, see claim.sql), until one is due.
WITH RECURSIVE oldest AS (
    SELECT f.priority, f.available_at
    FROM (
        SELECT j.priority, j.available_at
        FROM jq_live_jobs j
        WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
          AND j.status OPERATOR(pg_catalog.=) 'pending'
        ORDER BY j.priority DESC, j.available_at, j.id
        LIMIT 1
    ) AS f
    UNION ALL
    SELECT n.priority, n.available_at
    FROM oldest o
    CROSS JOIN LATERAL (
        SELECT j.priority, j.available_at
        FROM jq_live_jobs j
        WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
          AND j.status OPERATOR(pg_catalog.=) 'pending'
          AND j.priority < o.priority
        ORDER BY j.priority DESC, j.available_at, j.id
        LIMIT 1
    ) AS n
)
SELECT EXISTS (SELECT 1 FROM oldest o WHERE o.available_at <= $2)
