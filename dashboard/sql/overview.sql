-- The overview: one row per queue the role may see (the views filter with jq_can_see). Limits and
-- rates each show the larger of the queue's and its keys' figures, which may overlap.
SELECT s.queue_name,
       s.pending, s.scheduled, s.running, s.dead, s.cancelled,
       extract(epoch FROM s.oldest_claimable_age)::float8 AS oldest_claimable_seconds,
       s.held_by_pause,
       GREATEST(s.held_by_concurrency_limit, s.held_by_key_limit) AS held_by_limits,
       GREATEST(s.held_by_rate_limit, s.held_by_key_rate_limit) AS held_by_rate,
       s.held_by_dependency,
       coalesce(h.claimable_age_warning, false) AS claimable_age_warning,
       coalesce(h.expiring_leases_warning, false) AS expiring_leases_warning,
       coalesce(h.dead_age_warning, false) AS dead_age_warning,
       coalesce(h.paused, false) AS paused,
       coalesce(h.maintenance_stale, false) AS maintenance_stale
FROM jq_queue_stats s
LEFT JOIN jq_queue_health h ON h.queue_name OPERATOR(pg_catalog.=) s.queue_name
ORDER BY s.queue_name
