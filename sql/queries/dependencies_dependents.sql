-- $1 jobs that just succeeded and have dependents (bigint[]), $2 those that just succeeded and had
-- dependencies (bigint[]), $3 the union of what those depended on (bigint[])
-- The jobs that depend on $1, one row per pair, and whether the job counts them in parts
-- (sql/schema/tables.sql, jq_dependency_parts). Read in a fresh snapshot after the completion's
-- update, which waited for any enqueue that was marking those jobs: its rows are seen here, and no
-- enqueue can name those jobs as live any more (src/api/dependencies.rs).
-- And the rows of $2 in jq_job_dependencies go, found by their key, as they leave jq_live_jobs: rows
-- in which they are the dependent, never those read here, since a job runs only once every job it
-- depends on has succeeded.
WITH unlinked AS (
    DELETE FROM jq_job_dependencies d
    WHERE d.depends_on = ANY ($3) AND d.job_id = ANY ($2)
)
SELECT d.job_id, d.depends_on, d.parted
FROM jq_job_dependencies d
WHERE d.depends_on = ANY ($1)
