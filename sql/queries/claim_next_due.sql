-- $1 queue_name, $2 now
-- Microseconds until the queue's earliest scheduled job (run_at or backoff) becomes claimable; NULL
-- when none is scheduled. A waiting claim sleeps no longer than this. One probe of the arrival-order
-- index of pending jobs.
SELECT (extract(epoch FROM pg_catalog.min(j.available_at) - $2) * 1000000::numeric)::bigint
FROM jq_jobs j
WHERE j.queue_name = $1 AND j.status OPERATOR(pg_catalog.=) 'pending' AND j.available_at > $2
