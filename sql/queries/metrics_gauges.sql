-- jq_metrics' gauges: one row per queue of jq_queue_stats, with its health warnings. Reads only the
-- views, which a pg_monitor member may read.
SELECT s.queue_name,
       s.pending, s.scheduled, s.running, s.dead, s.cancelled, s.expiring_10s,
       extract(epoch FROM s.oldest_claimable_age)::float8,
       extract(epoch FROM s.oldest_dead_age)::float8,
       h.claimable_age_warning, h.expiring_leases_warning, h.dead_age_warning
FROM jq_queue_stats s
JOIN jq_queue_health h USING (queue_name)
ORDER BY s.queue_name
