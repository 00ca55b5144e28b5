-- $1 queue_name, $2 error_code (NULL: any), $3 max_jobs
-- Deletes up to $3 dead jobs of the queue and their events, those that died longest ago first.
WITH picked AS (
    SELECT j.id
    FROM jq_live_jobs j
    WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
      AND j.status OPERATOR(pg_catalog.=) 'dead'
      AND ($2::text IS NULL OR j.last_error_code = $2)
    ORDER BY j.finished_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), purged AS (
    DELETE FROM jq_live_jobs j
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
      AND j.status OPERATOR(pg_catalog.=) 'dead'
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
