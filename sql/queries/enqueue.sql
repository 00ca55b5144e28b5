-- $1 queue_id, $2 payload, $3 priority, $4 run_at, $5 max_attempts, $6 dedup_key (NULL here),
-- $7 ordering_key, $8 now, $9 concurrency_key, $10 expires_at,
-- $11 depends_on (NULL: none), $12 awaiting: how many of them have not succeeded (guide, "Workflows")
-- The queue's number and its default max_attempts come from the settings the session keeps
-- (src/api/settings.rs), so the insert reads no other table.
-- A job without a dedup key has no conflict to arbitrate. A plain INSERT skips ON CONFLICT's
-- speculative insertion (see enqueue_dedup.sql), which costs every job an extra WAL record.
INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts,
                          dedup_key, ordering_key, created_at, concurrency_key, expires_at, depends_on, awaiting)
VALUES ($1, $2, $3, coalesce($4, $8), $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING id
