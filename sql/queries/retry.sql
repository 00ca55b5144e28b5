-- $1 job_id, $2 now
-- Re-drive: same id and history, a fresh attempt budget (attempt_count restarts; the event keeps the
-- count it had). The fencing token is never reset, so leases from before stay stale.
--
-- The UPDATE finds the row by the ctid its lock was taken on: with `status IN ('dead', 'cancelled')`
-- in its WHERE, the planner may otherwise walk the whole index of dead and cancelled jobs whenever
-- statistics say there are few (see complete.sql; the plan test checks this one too).
WITH before AS (
    SELECT j.id, j.ctid, j.attempt_count FROM jq_live_jobs j WHERE j.id = $1 FOR UPDATE
), redriven AS (
    UPDATE jq_live_jobs j
    SET status = 'pending',
        available_at = $2,
        attempt_count = 0,
        finished_at = NULL
    FROM before b
    WHERE j.ctid = b.ctid
      AND j.status OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'cancelled']::jq_status[])
    RETURNING j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id) AS queue_name, j.lease_token, b.attempt_count,
              j.depends_on
)
INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, lease_token)
SELECT r.id, r.queue_name, 'retried', 'pending', $2, r.attempt_count, r.lease_token
FROM redriven r
-- What it depends on: it waits again for those that have not succeeded (guide, "Workflows").
RETURNING job_id, queue_name, (SELECT r.depends_on FROM redriven r WHERE r.id = job_id) AS depends_on
