-- $1 queue_name
-- The queue's rate limits, each with its period in microseconds (as interval comparison counts
-- them: a month is 30 days); NULLs for none, and no row for a queue without settings.
SELECT q.rate_limit, (extract(epoch FROM q.rate_period) * 1000000::numeric)::bigint,
       q.key_rate_limit, (extract(epoch FROM q.key_rate_period) * 1000000::numeric)::bigint
FROM jq_queues q
WHERE q.queue_name = $1
