-- $1 jobs that ended: succeeded, dead or cancelled (bigint[]); $2 the most rows to settle; $3, $4
-- pairwise: a job that just succeeded and had dependencies, and one of those it depended on
-- (bigint[] each)
-- Settles up to $2 rows of the jobs waiting on $1 (sql/schema/tables.sql, jq_job_dependencies) and
-- returns them, one per pair, with whether the waiting job counts in parts: src/api/dependencies.rs
-- counts those down (a success) or cancels them (a death or cancel). A row turns settled once:
-- one locked by another statement settling it right now is skipped, never waited for, and one
-- settled since this statement's snapshot is re-read as settled and left out (READ COMMITTED), so
-- no end is counted twice. What is left here, the reap pass settles (dependencies_ended.sql).
-- The UPDATE finds the rows `due` locked by their whole key and does not test `settled` again:
-- no other statement can change them while this one holds them, and the test would match the
-- index of unsettled rows, whose generic plan read every unsettled row of the table to update
-- a hundred (plan test `workflow_statements_read_by_key`).
--
-- And the rows of $3 go, each found by its whole key, as they leave jq_live_jobs: rows in which
-- they are the dependent, never those settled here, since a job runs only once every job it
-- depends on has succeeded. By pairs, not by `depends_on = ANY ($4) AND job_id = ANY ($3)`: the
-- generic plan of that read every row of each dependency and filtered them by job, so each of a
-- fan-out's jobs read the rows of all its siblings (plan test `workflow_statements_read_by_key`).
WITH unlinked AS (
    DELETE FROM jq_job_dependencies d
    USING ROWS FROM (pg_catalog.unnest($3::bigint[]), pg_catalog.unnest($4::bigint[])) AS u(job_id, depends_on)
    WHERE d.depends_on = u.depends_on
      AND d.job_id = u.job_id
), due AS MATERIALIZED (
    SELECT d.depends_on, d.job_id
    FROM jq_job_dependencies d
    WHERE d.depends_on = ANY ($1)
      AND NOT d.settled
    LIMIT $2
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE jq_job_dependencies d
SET settled = true
FROM ROWS FROM (pg_catalog.unnest(ARRAY(SELECT u.depends_on FROM due u)),
                pg_catalog.unnest(ARRAY(SELECT u.job_id FROM due u))) AS u(depends_on, job_id)
WHERE d.depends_on = u.depends_on
  AND d.job_id = u.job_id
RETURNING d.job_id, d.depends_on, d.parted
