-- $1 job_id, $2 now
-- A running job loses its lease here, so its worker's heartbeat and completion find nothing to match.
WITH before AS (
    SELECT j.id, j.lease_owner FROM jq_live_jobs j WHERE j.id = $1 FOR UPDATE
), cancelled AS (
    UPDATE jq_live_jobs j
    SET status = 'cancelled',
        -- A held job waits for nothing any more (guide, "Workflows").
        awaiting = 0,
        lease_owner = NULL,
        lease_expires_at = NULL,
        finished_at = $2
    FROM before b
    WHERE j.id = b.id
      AND j.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[])
    RETURNING j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id) AS queue_name, j.attempt_count, j.lease_token, b.lease_owner,
              EXISTS (SELECT FROM jq_job_dependencies x WHERE x.depends_on = j.id AND NOT x.settled) AS dependents
)
INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token)
SELECT c.id, c.queue_name, 'cancelled', 'cancelled', $2, c.attempt_count, c.lease_owner, c.lease_token
FROM cancelled c
-- A cancel cancels the jobs that depend on it too (guide, "Workflows").
RETURNING job_id, queue_name, (SELECT c.dependents FROM cancelled c WHERE c.id = job_id) AS dependents
