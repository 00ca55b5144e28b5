-- $1 job_id
-- Deletes one dead or cancelled job and its events, as purge_dead.sql does for many; no row for a
-- job in any other state, or one that does not exist.
--
-- The job is locked by its primary key first, and its state is checked on what that lock returns
-- (the newest version of the row), not on the row the DELETE reads: with `status IN ('dead',
-- 'cancelled')` on jq_live_jobs itself, the planner may walk the whole index of dead and cancelled
-- jobs instead whenever statistics say there are few (see retry.sql; the plan test checks this one
-- too). The DELETE finds the row by id, so a version newer than the statement's snapshot is
-- re-read and deleted (EvalPlanQual) rather than skipped (see complete.sql).
WITH before AS (
    SELECT j.id, j.status FROM jq_live_jobs j WHERE j.id = $1 FOR UPDATE
), purged AS (
    DELETE FROM jq_live_jobs j
    USING before b
    WHERE j.id = b.id
      AND b.status OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'cancelled']::jq_status[])
    RETURNING j.id, j.depends_on
), unlinked AS (
    -- Its rows of jq_job_dependencies and jq_dependency_parts go with it (guide, "Workflows").
    DELETE FROM jq_job_dependencies d USING purged p
    WHERE d.depends_on = ANY (p.depends_on) AND d.job_id = p.id
), unparted AS (
    DELETE FROM jq_dependency_parts d
    WHERE d.job_id = ANY (ARRAY(SELECT p.id FROM purged p WHERE p.depends_on IS NOT NULL))
), events AS (
    DELETE FROM jq_job_events e WHERE e.job_id = ANY (ARRAY(SELECT id FROM purged))
)
SELECT id FROM purged
