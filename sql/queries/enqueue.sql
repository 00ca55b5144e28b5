-- $1 queue_name, $2 payload, $3 priority, $4 run_at, $5 max_attempts, $6 dedup_key (NULL here),
-- $7 ordering_key, $8 now, $9 concurrency_key,
-- $10 expires_at
-- A job without a dedup key has no conflict to arbitrate. A plain INSERT skips ON CONFLICT's
-- speculative insertion (see enqueue_dedup.sql), which costs every job an extra WAL record.
-- No row when the queue has no number yet: the caller gives it one (queue_register.sql) and runs
-- this again.
INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts,
                          dedup_key, ordering_key, created_at, concurrency_key, expires_at)
SELECT n.queue_id, $2, $3, coalesce($4, $8),
       coalesce($5, (SELECT q.max_attempts FROM jq_queues q WHERE q.queue_name = $1), 8),
       $6, $7, $8, $9, $10
FROM jq_queue_ids n
WHERE n.queue_name = $1
RETURNING id
