-- $1 queue_name, $2 worker, $3 lease (NULL: queue default), $4 batch_size, $5 now
--
-- One statement: pick up to $4 claimable rows in claim order, skipping rows another claimer has
-- locked, and turn exactly those into running rows with a fresh lease and the next fencing token.
WITH queue AS (
    SELECT coalesce($3, q.default_lease, interval '60 seconds') AS lease,
           q.max_runtime,
           coalesce(q.paused, false) AS paused
    FROM (VALUES (1)) AS one
    LEFT JOIN jq_queues q ON q.queue_name = $1
), picked AS (
    SELECT j.id
    FROM jq_jobs j
    WHERE j.queue_name = $1
      AND j.status = 'pending'
      AND j.available_at <= $5
      AND NOT (SELECT paused FROM queue)
      -- Ordering keys: a keyed job waits while another job of its key runs or an earlier one is pending.
      AND (j.ordering_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM jq_jobs k
            WHERE k.queue_name = j.queue_name
              AND k.ordering_key = j.ordering_key
              AND k.status IN ('pending', 'running')
              AND k.id <> j.id
              AND (k.status = 'running' OR k.id < j.id)))
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT $4
    FOR UPDATE OF j SKIP LOCKED
), claimed AS (
    UPDATE jq_jobs j
    SET status = 'running',
        attempt_count = j.attempt_count + 1,
        lease_token = j.lease_token + 1,
        lease_owner = $2,
        lease_length = queue.lease,
        claimed_at = $5,
        run_deadline = $5 + queue.max_runtime,
        -- least() skips NULL: without a max_runtime the lease is the full length.
        lease_expires_at = least($5 + queue.lease, $5 + queue.max_runtime)
    FROM picked, queue
    WHERE j.id = picked.id
    RETURNING j.id, j.queue_name, j.payload, j.priority, j.attempt_count, j.max_attempts,
              j.lease_token, j.lease_expires_at, j.available_at
)
-- No ORDER BY: the caller orders the (at most batch_size) returned rows, so the plan has no Sort node.
SELECT id, queue_name, payload, priority, attempt_count, max_attempts, lease_token, lease_expires_at,
       available_at
FROM claimed
