-- What the connecting role may read and call, asked on every page: a right granted or revoked
-- shows at the next page. pg_monitor's members hold no EXECUTE on jq_has_right, so it is asked
-- only where it may be called.
SELECT pg_catalog.has_table_privilege('jq_managed_jobs', 'SELECT') AS jobs,
       pg_catalog.has_table_privilege('jq_managed_job_events', 'SELECT') AS events,
       pg_catalog.has_table_privilege('jq_schedules', 'SELECT') AS schedules,
       pg_catalog.has_function_privilege('jq_has_right(text, text)', 'EXECUTE') AS has_right,
       pg_catalog.has_function_privilege('jq_parent_results(bigint)', 'EXECUTE') AS parent_results,
       pg_catalog.has_function_privilege('jq_failure_counts()', 'EXECUTE') AS failure_counts,
       pg_catalog.has_function_privilege('jq_queue_counters()', 'EXECUTE') AS counters,
       CURRENT_USER::text AS role
