-- Monitoring: members of the built-in pg_monitor role may read the views and call jq_metrics()
-- (which reads only the views and shared memory). They gain nothing else: no function that changes
-- jobs works without the table rights they lack. Resetting the counters is for the owner and those
-- it grants it to.
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT SELECT ON jq_queue_stats, jq_queue_health TO pg_monitor;
REVOKE EXECUTE ON FUNCTION jq_stats_reset() FROM PUBLIC;
