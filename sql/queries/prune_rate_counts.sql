-- $1 max_rows, $2 now
-- Forgets the counts of rate windows that are over (guide, "Flow control"): a key that is no
-- longer claimed would keep its row for ever. The next claim its rate counts writes a row again.
-- A row a claim is counting (its lock taken) is left for the next prune.
DELETE FROM jq_rate_counts c
WHERE c.ctid IN (
    SELECT r.ctid
    FROM jq_rate_counts r
    JOIN jq_queue_ids n ON n.queue_id = r.queue_id
    LEFT JOIN jq_queues q ON q.queue_name = n.queue_name
    WHERE r.window_start + coalesce(CASE WHEN r.concurrency_key = '' THEN q.rate_period ELSE q.key_rate_period END,
                                    interval '0') <= $2
    LIMIT $1
    FOR UPDATE OF r SKIP LOCKED)
