-- $1 queue_name. The queue's figures, as the overview shows them; no row: the role may not see
-- the queue, or it does not exist.
SELECT s.pending, s.scheduled, s.running, s.dead, s.cancelled,
       extract(epoch FROM s.oldest_claimable_age)::float8 AS oldest_claimable_seconds,
       s.held_by_pause, s.held_by_concurrency_limit, s.held_by_key_limit, s.held_by_rate_limit,
       s.held_by_key_rate_limit, s.held_by_dependency,
       coalesce(h.paused, false) AS paused,
       h.warn_claimable_age::text, h.warn_expiring_leases, h.warn_dead_age::text
FROM jq_queue_stats s
LEFT JOIN jq_queue_health h ON h.queue_name OPERATOR(pg_catalog.=) s.queue_name
WHERE s.queue_name OPERATOR(pg_catalog.=) $1
