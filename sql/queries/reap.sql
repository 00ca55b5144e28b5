-- $1 max_jobs, $2 now, $3 queue_name (NULL: every queue), $4 jobs to skip, $5 the only job to reap
-- (NULL: any)
-- Expired leases become pending after backoff, or dead when the attempts are spent. The locking
-- subquery skips rows a worker is completing right now; re-checking status and expiry in the UPDATE
-- keeps the transition guarded on its own, so a completion that commits first always wins.
--
-- The UPDATE finds its rows by `id = ANY(...)`, a primary-key lookup whatever the estimates: joined
-- to the CTE instead, stale statistics made the planner loop over every expired row once per reaped
-- row, 22 s for a pass of 10,000. The event's worker is the owner before this update; a subquery in
-- RETURNING reads the statement's snapshot, in which the row still has it.
WITH expired AS (
    SELECT j.id
    FROM jq_live_jobs j
    WHERE j.status OPERATOR(pg_catalog.=) 'running'
      AND j.lease_expires_at <= $2
      AND ($3::text IS NULL OR j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $3))
      AND j.id <> ALL ($4::bigint[])
      AND ($5::bigint IS NULL OR j.id = $5)
    LIMIT $1
    FOR UPDATE SKIP LOCKED
), reaped AS (
    UPDATE jq_live_jobs j
    SET status = CASE WHEN j.attempt_count < j.max_attempts
                      THEN 'pending' ELSE 'dead' END::jq_status,
        available_at = CASE WHEN j.attempt_count < j.max_attempts
                            THEN $2 + jq_backoff((SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id), j.attempt_count)
                            ELSE j.available_at END,
        finished_at = CASE WHEN j.attempt_count < j.max_attempts THEN NULL ELSE $2 END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        last_error_code = 'LEASE_EXPIRED',
        last_error_message = CASE WHEN j.lease_expires_at = j.run_deadline
                                  THEN 'maximum runtime reached' ELSE 'lease expired' END
    WHERE j.id = ANY (ARRAY(SELECT id FROM expired))
      AND j.status OPERATOR(pg_catalog.=) 'running'
      AND j.lease_expires_at <= $2
    RETURNING j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id) AS queue_name, j.status, j.attempt_count, j.lease_token,
              (SELECT o.lease_owner FROM jq_live_jobs o WHERE o.id = j.id) AS lease_owner,
              j.last_error_message, EXISTS (SELECT FROM jq_job_dependencies x WHERE x.depends_on = j.id AND NOT x.settled) AS dependents
), logged AS (
    INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token,
                               error_code, error_message)
    SELECT r.id, r.queue_name, 'lease_expired', r.status, $2, r.attempt_count, r.lease_owner,
           r.lease_token, 'LEASE_EXPIRED', r.last_error_message
    FROM reaped r
)
-- Read from `reaped`, not from the INSERT's RETURNING: a lookup in `reaped` per returned row would
-- scan it once per row, quadratic in the pass (4 s for a pass of 10,000 leases). PostgreSQL runs a
-- data-modifying WITH to its end whether or not the query reads it.
SELECT r.id AS job_id, r.queue_name, r.status OPERATOR(pg_catalog.=) 'dead' AS dead,
       -- A death cancels the jobs that depend on it (guide, "Workflows").
       r.dependents
FROM reaped r
