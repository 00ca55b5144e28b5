-- $1 queue_name, $2 worker, $3 lease (NULL: queue default), $4 batch_size, $5 now,
-- $6 admitted: true only after the caller holds the queue's row lock (see claim.rs)
--
-- One statement: pick up to $4 claimable rows, skipping rows another claimer has locked, and turn
-- exactly those into running rows with a fresh lease and the next fencing token.
WITH queue AS (
    SELECT coalesce($3, q.default_lease, interval '60 seconds') AS lease,
           q.max_runtime,
           coalesce(q.paused, false) AS paused,
           -- Jobs available before this are starving. A queue without a row has the default limit;
           -- a NULL limit means none, and '-infinity' then matches no job.
           coalesce($5 - CASE WHEN q.queue_name IS NULL THEN interval '5 minutes'
                              ELSE q.starvation_limit END,
                    '-infinity') AS starving_before,
           -- How many jobs this claim may take. A limited queue takes none until the caller holds
           -- its row lock; then the count of running jobs is read in this statement's snapshot,
           -- taken after that lock, so it includes every claim that committed before.
           CASE WHEN q.concurrency_limit IS NULL THEN $4
                WHEN $6 THEN greatest(0, least($4, q.concurrency_limit - (
                         SELECT count(*) FROM jq_jobs r WHERE r.queue_name = $1 AND r.status = 'running')))
                ELSE 0 END AS slots
    FROM (VALUES (1)) AS one
    LEFT JOIN jq_queues q ON q.queue_name = $1
), starving AS (
    -- Fairness first: jobs that waited past the starvation limit, oldest first, whatever their
    -- priority. Usually one index probe that finds nothing.
    SELECT j.id
    FROM jq_jobs j
    WHERE j.queue_name = $1
      AND j.status = 'pending'
      AND j.available_at <= (SELECT starving_before FROM queue)
      AND NOT (SELECT paused FROM queue)
      AND (j.ordering_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM jq_jobs k
            WHERE k.queue_name = j.queue_name AND k.ordering_key = j.ordering_key
              AND k.status IN ('pending', 'running') AND k.id <> j.id
              AND (k.status = 'running' OR k.id < j.id)))
    ORDER BY j.available_at, j.id
    LIMIT (SELECT slots FROM queue)
    FOR UPDATE OF j SKIP LOCKED
), prioritized AS (
    -- Then priority order among the rest.
    SELECT j.id
    FROM jq_jobs j
    WHERE j.queue_name = $1
      AND j.status = 'pending'
      AND j.available_at <= $5
      AND j.available_at > (SELECT starving_before FROM queue)
      AND NOT (SELECT paused FROM queue)
      -- Ordering keys: a keyed job waits while another job of its key runs or an earlier one is pending.
      AND (j.ordering_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM jq_jobs k
            WHERE k.queue_name = j.queue_name AND k.ordering_key = j.ordering_key
              AND k.status IN ('pending', 'running') AND k.id <> j.id
              AND (k.status = 'running' OR k.id < j.id)))
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT (SELECT slots FROM queue) - (SELECT count(*) FROM starving)
    FOR UPDATE OF j SKIP LOCKED
), picked AS (
    SELECT id, true AS starved FROM starving
    UNION ALL
    SELECT id, false FROM prioritized
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
              j.lease_token, j.lease_expires_at, j.available_at, picked.starved
)
-- No ORDER BY: the caller orders the (at most batch_size) returned rows, so the plan has no Sort node.
SELECT id, queue_name, payload, priority, attempt_count, max_attempts, lease_token, lease_expires_at,
       available_at, starved
FROM claimed
