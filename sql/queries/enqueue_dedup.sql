-- $1 queue_id, $2 payload, $3 priority, $4 run_at, $5 max_attempts, $6 dedup_key, $7 ordering_key, $8 now,
-- $9 concurrency_key, $10 expires_at, $11 depends_on, $12 awaiting, as in enqueue.sql
-- Returns the new id, or nothing when a live job already holds the dedup key (see
-- enqueue_existing.sql).
INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts,
                          dedup_key, ordering_key, created_at, concurrency_key, expires_at, depends_on, awaiting)
VALUES ($1, $2, $3, coalesce($4, $8), $5, $6, $7, $8, $9, $10, $11, $12)
ON CONFLICT (queue_id, dedup_key) WHERE dedup_key IS NOT NULL AND status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[])
DO NOTHING
RETURNING id
