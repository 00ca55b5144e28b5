-- $1 depends_on (bigint[])
-- Marks each dependency that is still in jq_live_jobs as having dependents, and so locks it until
-- the enqueue commits (guide, "Workflows"). The lock is what makes the dependency's status read here
-- final for this enqueue: a completion, failure or cancel of it waits for the commit, then sees the
-- mark (READ COMMITTED re-reads the row; REPEATABLE READ fails with 40001) and looks for the jobs
-- waiting on it, this one among them. A dependency that completed meanwhile is not returned: it is
-- in the history (src/api/dependencies.rs reads it there).
--
-- Locked in the order of their ids first, as dependencies_release.sql says why.
WITH locked AS MATERIALIZED (
    SELECT j.id FROM jq_live_jobs j WHERE j.id = ANY ($1) ORDER BY j.id FOR UPDATE OF j
)
UPDATE jq_live_jobs j
SET dependents = true
WHERE j.id = ANY (ARRAY(SELECT l.id FROM locked l))
RETURNING j.id, j.status,
          CASE WHEN j.last_error_code = 'EXPIRED' AND j.status OPERATOR(pg_catalog.=) 'cancelled'
               THEN 'expired' ELSE j.status::text END AS ended
