-- $1 queue_name, $2 the rates' keys ('': the queue's own), $3 the claims to count for each, $4 the
-- window they were claimed in.
-- Counts claims against their rates, in the window of the claim's clock. The claim was admitted
-- only if no newer window was counted (src/api/rates.rs, claim_keyed.sql), so a window never goes
-- back; should one ever be older, it is added to the newer window, which can only hold back more.
INSERT INTO jq_rate_counts AS c (queue_id, concurrency_key, window_start, claims)
SELECT n.queue_id, k.concurrency_key, $4, k.claims
FROM jq_queue_ids n,
     ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::int[])) AS k(concurrency_key, claims)
WHERE n.queue_name = $1
ON CONFLICT (queue_id, concurrency_key) DO UPDATE
SET claims = CASE WHEN c.window_start >= excluded.window_start THEN c.claims + excluded.claims
                  ELSE excluded.claims END,
    window_start = greatest(c.window_start, excluded.window_start)
RETURNING 1
