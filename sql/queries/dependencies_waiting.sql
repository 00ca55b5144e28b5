-- $1 jobs that just ended dead or cancelled (bigint[])
-- The pending jobs that depend on them, each with one of those it fails by: the next round of a
-- failure's cancellations (src/api/dependencies.rs). Read in a fresh snapshot after the update that
-- ended those jobs, which waited for any enqueue that was marking them: its rows are seen here.
SELECT d.job_id, d.depends_on
FROM jq_job_dependencies d
JOIN jq_live_jobs j ON j.id = d.job_id
WHERE d.depends_on = ANY ($1)
  AND j.status OPERATOR(pg_catalog.=) 'pending'
