-- $1 queue_name, $2 the rates' keys ('': the queue's own), $3 the claims to count for each, $4 the
-- window they were claimed in.
-- Counts claims against their rates. A window never goes back: claims counted for a window older
-- than the one a rate last counted in (a claim whose clock read came before another's) are added
-- to the newer one, which can only hold back more.
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
