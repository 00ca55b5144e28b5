-- $1 jobs (bigint[]), $2 one of their parts each (int[]), $3 how many of the part's dependencies
-- just succeeded (int[]); the pairs (job, part) distinct
-- Counts down the parts of jobs that count their dependencies in parts (sql/schema/tables.sql,
-- jq_dependency_parts), and returns each part that reached 0: the job's own row counts those down
-- next (dependencies_release.sql). Two completions counting down one part at once: the second
-- waits for the first's lock and counts down from what the first left (READ COMMITTED), so only
-- one of them brings it to 0.
--
-- The parts are locked in the order of their keys before the update, for the reason
-- dependencies_release.sql gives for jobs; a completion locks parts before jobs.
WITH given AS (
    SELECT g.job_id, g.part, g.done
    FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::int[]), pg_catalog.unnest($3::int[]))
        AS g(job_id, part, done)
), locked AS MATERIALIZED (
    SELECT p.job_id, p.part
    FROM jq_dependency_parts p
    WHERE p.job_id = ANY ($1)
      AND (p.job_id, p.part) IN (SELECT g.job_id, g.part FROM given g)
    ORDER BY p.job_id, p.part
    FOR UPDATE OF p
)
UPDATE jq_dependency_parts p
SET awaiting = p.awaiting - g.done
FROM given g
WHERE p.job_id = ANY (ARRAY(SELECT l.job_id FROM locked l))
  AND p.job_id = g.job_id
  AND p.part = g.part
  AND p.awaiting > 0
RETURNING p.job_id, p.awaiting = 0 AS emptied
