-- guard: stops the drop of a day of history (src/api/retention.rs, `ddl`) when it returns a row.
-- $day: the day's qualified name, written in.
-- Whether a pending or running job depends on a job of the day (guide, "Workflows"): such a day is
-- kept until those jobs end.
SELECT 1
FROM jq_job_dependencies d
JOIN jq_live_jobs c ON c.id = d.job_id
JOIN $day h ON h.id = d.depends_on
WHERE c.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[])
LIMIT 1
