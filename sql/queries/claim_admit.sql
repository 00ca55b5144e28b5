-- $1 queue_name
-- For a queue with a concurrency limit: take its row lock, so that limited claims of this queue run
-- one after another and each counts the running jobs only after the previous one committed. Returns
-- no row (and locks nothing) for a queue without a limit.
SELECT q.concurrency_limit
FROM jq_queues q
WHERE q.queue_name = $1 AND q.concurrency_limit IS NOT NULL
FOR UPDATE
