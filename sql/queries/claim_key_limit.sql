-- $1 queue_name
-- The queue's key_concurrency_limit; no row when it has none.
SELECT q.key_concurrency_limit FROM jq_queues q WHERE q.queue_name = $1 AND q.key_concurrency_limit IS NOT NULL
