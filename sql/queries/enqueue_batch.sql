-- $1 queue_name, $2 payloads (jsonb[]), $3 priority, $4 run_at, $5 max_attempts, $6 now,
-- $7 concurrency_key, $8 expires_at (of every job)
-- Rows are inserted in input order, so ids ascend in input order; sorting by id returns them so.
-- No row when the queue has no number yet, as in enqueue.sql.
WITH inserted AS (
    INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts, created_at, concurrency_key,
                              expires_at)
    SELECT n.queue_id, p.payload, $3, coalesce($4, $6),
           coalesce($5, (SELECT q.max_attempts FROM jq_queues q WHERE q.queue_name = $1), 8),
           $6, $7, $8
    FROM jq_queue_ids n, pg_catalog.unnest($2::jsonb[]) WITH ORDINALITY AS p(payload, ord)
    WHERE n.queue_name = $1
    ORDER BY p.ord
    RETURNING id
)
SELECT id FROM inserted ORDER BY id
