-- $1 queue_id, $2 payloads (jsonb[]), $3 priority, $4 run_at, $5 max_attempts, $6 now,
-- $7 concurrency_key, $8 expires_at, $9 depends_on, $10 awaiting (of every job); the queue's number
-- and default max_attempts as in enqueue.sql.
-- Rows are inserted in input order, so ids ascend in input order; sorting by id returns them so.
WITH inserted AS (
    INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts, created_at, concurrency_key,
                              expires_at, depends_on, awaiting)
    SELECT $1, p.payload, $3, coalesce($4, $6), $5, $6, $7, $8, $9, $10
    FROM pg_catalog.unnest($2::jsonb[]) WITH ORDINALITY AS p(payload, ord)
    ORDER BY p.ord
    RETURNING id
)
SELECT id FROM inserted ORDER BY id
