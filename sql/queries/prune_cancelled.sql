-- $1 max_jobs, $2 now
-- Deletes up to $1 cancelled jobs that finished longer ago than their queue's retention (7 days for
-- a queue without a settings row; a NULL retention keeps them), oldest first, with their events.
-- Cancelled jobs stay in the hot table until then, since a re-drive may bring them back; they are
-- few, and jq_jobs_unresolved holds them.
WITH picked AS (
    SELECT j.id
    FROM jq_live_jobs j
    JOIN jq_queue_ids n ON n.queue_id = j.queue_id
    LEFT JOIN jq_queues q ON q.queue_name = n.queue_name
    WHERE j.status OPERATOR(pg_catalog.=) 'cancelled'
      AND j.finished_at < $2 - CASE WHEN q.queue_name IS NULL THEN interval '7 days' ELSE q.retention END
    ORDER BY j.finished_at
    LIMIT $1
    FOR UPDATE OF j SKIP LOCKED
), pruned AS (
    DELETE FROM jq_live_jobs j
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
      AND j.status OPERATOR(pg_catalog.=) 'cancelled'
    RETURNING j.id, j.depends_on
), unlinked AS (
    -- Its rows of jq_job_dependencies and jq_dependency_parts go with it (guide, "Workflows").
    DELETE FROM jq_job_dependencies d USING pruned p
    WHERE d.depends_on = ANY (p.depends_on) AND d.job_id = p.id
), unparted AS (
    DELETE FROM jq_dependency_parts d
    WHERE d.job_id = ANY (ARRAY(SELECT p.id FROM pruned p WHERE p.depends_on IS NOT NULL))
), events AS (
    DELETE FROM jq_job_events e WHERE e.job_id = ANY (ARRAY(SELECT id FROM pruned))
)
SELECT id FROM pruned
