-- $1 queue_name
-- Whether the queue has a key limit (its own or a key's) or a key rate, which count in the claim's
-- snapshot; no row when it has none.
SELECT true FROM jq_queues q
WHERE q.queue_name = $1 AND (q.key_concurrency_limit IS NOT NULL OR q.key_rate_limit IS NOT NULL)
UNION ALL
SELECT true FROM jq_key_settings s WHERE s.queue_name = $1 AND s.concurrency_limit IS NOT NULL
LIMIT 1
