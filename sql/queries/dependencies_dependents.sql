-- $1 jobs that just succeeded and have dependents (bigint[]); $2, $3 pairwise: a job that just
-- succeeded and had dependencies, and one of those it depended on (bigint[] each)
-- The jobs that depend on $1, one row per pair, and whether the job counts them in parts
-- (sql/schema/tables.sql, jq_dependency_parts). Read in a fresh snapshot after the completion's
-- update, which waited for any enqueue that was marking those jobs: its rows are seen here, and no
-- enqueue can name those jobs as live any more (src/api/dependencies.rs).
-- And the rows of $2 in jq_job_dependencies go, each found by its whole key, as they leave
-- jq_live_jobs: rows in which they are the dependent, never those read here, since a job runs only
-- once every job it depends on has succeeded. By pairs, not by `depends_on = ANY ($3) AND job_id =
-- ANY ($2)`: the generic plan of that read every row of each dependency and filtered them by job,
-- so each of a fan-out's jobs read the rows of all its siblings (plan test
-- `workflow_statements_read_by_key`).
WITH unlinked AS (
    DELETE FROM jq_job_dependencies d
    USING ROWS FROM (pg_catalog.unnest($2::bigint[]), pg_catalog.unnest($3::bigint[])) AS u(job_id, depends_on)
    WHERE d.depends_on = u.depends_on
      AND d.job_id = u.job_id
)
SELECT d.job_id, d.depends_on, d.parted
FROM jq_job_dependencies d
WHERE d.depends_on = ANY ($1)
