-- $1 queue_name, $2 payload, $3 priority, $4 run_at, $5 max_attempts, $6 dedup_key, $7 ordering_key, $8 now,
-- $9 concurrency_key, $10 expires_at
-- Returns the new id, or nothing when a live job already holds the dedup key (see
-- enqueue_existing.sql) or the queue has no number yet (see enqueue.sql).
INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts,
                          dedup_key, ordering_key, created_at, concurrency_key, expires_at)
SELECT n.queue_id, $2, $3, coalesce($4, $8),
       coalesce($5, (SELECT q.max_attempts FROM jq_queues q WHERE q.queue_name = $1), 8),
       $6, $7, $8, $9, $10
FROM jq_queue_ids n
WHERE n.queue_name = $1
ON CONFLICT (queue_id, dedup_key) WHERE dedup_key IS NOT NULL AND status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[])
DO NOTHING
RETURNING id
