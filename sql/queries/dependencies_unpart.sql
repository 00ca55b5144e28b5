-- $1 jobs that just succeeded and had more than 16 dependencies (bigint[])
-- Their rows of jq_dependency_parts (sql/schema/tables.sql), which leave jq_live_jobs with them.
DELETE FROM jq_dependency_parts p
WHERE p.job_id = ANY ($1)
