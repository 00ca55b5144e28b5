-- $1 job_id, $2 awaiting, $3 for a job with more than 16 dependencies, what each of its parts
-- waits for (int[], part 0 first; empty otherwise)
-- A re-driven job with dependencies waits again for those that have not succeeded (guide,
-- "Workflows"): their number, counted by src/api/dependencies.rs as an enqueue counts it, or the
-- number of its parts not yet at 0 and each part's count (sql/schema/tables.sql,
-- jq_dependency_parts). The re-drive holds the job's lock and has settled its rows of
-- jq_job_dependencies again first (dependencies_relink.sql): a completion counting a part down
-- right now holds that part's row after the row it settled, so the re-drive waits for it there,
-- and one that comes later finds the job's row settled or not as this count says.
WITH job AS (
    UPDATE jq_live_jobs j
    SET awaiting = $2
    WHERE j.id = $1
      AND j.status OPERATOR(pg_catalog.=) 'pending'
    RETURNING j.id
), parts AS (
    UPDATE jq_dependency_parts p
    SET awaiting = c.awaiting
    FROM pg_catalog.unnest($3::int[]) WITH ORDINALITY AS c(awaiting, n)
    WHERE p.job_id = $1
      AND p.part = c.n - 1
      AND EXISTS (SELECT FROM job)
)
SELECT j.id FROM job j
