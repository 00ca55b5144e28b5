-- $1 queue_name
-- The queue's notify setting; no row (a queue without settings) means on.
SELECT q.notify FROM jq_queues q WHERE q.queue_name = $1
