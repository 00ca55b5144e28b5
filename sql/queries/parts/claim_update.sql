-- The end of the claim statements (src/api/claim/take.rs joins them): the rows of `picked` become
-- running under a lease with the next fencing token, and are returned. Parameters as in claim.sql.
--
-- The UPDATE is the statement itself, returning what the claim returns: as a CTE read by a final
-- SELECT it cost every claim a stored copy of its rows and a CTE scan over it, one more plan node
-- to start and end (bench/README.md, "Where W3, W1 and the WAL stand").
)
UPDATE jq_live_jobs j
SET status = 'running',
    attempt_count = j.attempt_count + 1,
    lease_token = greatest(j.lease_token + 1, $7),
    lease_owner = $2,
    lease_length = $3,
    claimed_at = $5,
    run_deadline = $5 + $11,
    -- least() skips NULL: without a max_runtime the lease is the full length.
    lease_expires_at = least($5 + $3, $5 + $11)
WHERE j.ctid = ANY (ARRAY(SELECT ctid FROM picked))
-- No ORDER BY: the caller orders the (at most batch_size) returned rows. The job's concurrency key
-- tells the caller which key locks to keep (src/api/keys.rs). The last columns are what the
-- fairness check saw, for the queue's fairness bound (src/shared/front.rs): the oldest pending job
-- (NULL: none), and the priority every pending job has (NULL: more than one, or none).
RETURNING j.id, $1::text AS queue_name, j.payload, j.priority, j.attempt_count, j.max_attempts,
          j.lease_token, j.lease_expires_at, j.available_at,
          j.available_at <= coalesce($5 - $12, '-infinity') AS starved, j.concurrency_key,
-- fairness: begin
          (SELECT pg_catalog.min(o.available_at) FROM oldest o) AS oldest_pending,
          (SELECT CASE WHEN pg_catalog.count(*) OPERATOR(pg_catalog.=) 1 THEN pg_catalog.min(o.priority) END
           FROM oldest o) AS one_priority
-- fairness: end
-- without fairness:           NULL::timestamptz AS oldest_pending, NULL::int AS one_priority
