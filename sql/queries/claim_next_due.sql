-- $1 queue_name, $2 now
-- Microseconds until the queue's earliest scheduled job (run_at or backoff) becomes claimable; no row
-- when none is scheduled. A waiting claim sleeps no longer than this. One probe of the arrival-order
-- index of pending jobs.
-- ORDER BY and LIMIT rather than min(): only the arrival-order index gives that order, where min()
-- let the planner read the claim index instead, every entry of the queue (a plan test saw it).
SELECT (extract(epoch FROM j.available_at - $2) * 1000000::numeric)::bigint
FROM jq_live_jobs j
WHERE j.queue_name = $1 AND j.status OPERATOR(pg_catalog.=) 'pending' AND j.available_at > $2
ORDER BY j.available_at
LIMIT 1
