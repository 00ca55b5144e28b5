-- $1 max_jobs, $2 now, $3 queue_name (NULL: every queue), $4 jobs to skip, $5 the only job to
-- expire (NULL: any)
-- The expiry sweep (guide, "Snooze and deadlines"): pending jobs whose `expires_at` has passed end
-- cancelled, EXPIRED, each with its audit row. Claims never take such a job, so this only makes
-- the end visible. Found through their own index; rows locked right now (an operator's cancel)
-- are skipped, and the UPDATE re-checks the state on its own, so a re-drive or cancel that
-- commits first wins. By `id = ANY(...)`, as reap.sql does, for the same reason.
WITH due AS (
    SELECT j.id
    FROM jq_live_jobs j
    WHERE j.status OPERATOR(pg_catalog.=) 'pending'
      AND j.expires_at IS NOT NULL
      AND j.expires_at <= $2
      AND ($3::text IS NULL OR j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $3))
      AND j.id <> ALL ($4::bigint[])
      AND ($5::bigint IS NULL OR j.id = $5)
    ORDER BY j.expires_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), expired AS (
    UPDATE jq_live_jobs j
    SET status = 'cancelled',
        -- A held job waits for nothing any more (guide, "Workflows").
        awaiting = 0,
        finished_at = $2,
        last_error_code = 'EXPIRED',
        last_error_message = 'not claimed before expires_at'
    WHERE j.id = ANY (ARRAY(SELECT id FROM due))
      AND j.status OPERATOR(pg_catalog.=) 'pending'
      AND j.expires_at <= $2
    RETURNING j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id) AS queue_name,
              j.attempt_count, j.lease_token,
              EXISTS (SELECT FROM jq_job_dependencies x WHERE x.depends_on = j.id AND NOT x.settled) AS dependents
), logged AS (
    INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, lease_token, error_code, error_message)
    SELECT e.id, e.queue_name, 'cancelled', 'cancelled', $2, e.attempt_count, e.lease_token, 'EXPIRED',
           'not claimed before expires_at'
    FROM expired e
)
-- From `expired`, not from the INSERT's RETURNING, as reap.sql says why. An expiry cancels the jobs
-- that depend on it (guide, "Workflows").
SELECT e.id AS job_id, e.queue_name, e.dependents FROM expired e
