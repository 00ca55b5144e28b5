-- $1 queue_name
-- The queue's notify setting: true, false, or NULL (also for a queue without a row), which means
-- while someone listens (README, "Wake-ups").
SELECT q.notify FROM jq_queues q WHERE q.queue_name = $1
