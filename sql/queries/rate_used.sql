-- $1 queue_name, $2 concurrency key ('': the queue's own rate)
-- The window the rate last counted claims in, and how many; no row before its first claim. Read
-- by a claim that holds the queue's or the key's lock, in a snapshot taken after it.
SELECT c.window_start, c.claims
FROM jq_rate_counts c
WHERE c.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
  AND c.concurrency_key = $2
