-- $1 the new jobs' ids (bigint[]), $2 what each depends on (bigint[])
-- One row per new job and dependency (sql/schema/tables.sql, jq_job_dependencies).
INSERT INTO jq_job_dependencies (depends_on, job_id)
SELECT d.depends_on, j.job_id
FROM pg_catalog.unnest($1::bigint[]) AS j(job_id)
CROSS JOIN pg_catalog.unnest($2::bigint[]) AS d(depends_on)
