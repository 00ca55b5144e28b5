-- $1 job_id, $2 worker, $3 lease_token, $4 delay, $5 now, $6 the text 'running'
-- A snooze (guide, "Snooze and deadlines"): the running job is pending again after `delay`, and
-- gets back the attempt its claim counted, so snoozing never spends its budget. The lease ends
-- here, so the worker's later heartbeat or completion finds nothing to match; the next claim
-- hands out a higher token as always. The guarded transition and its audit row in one statement,
-- the row found as in fail.sql. Returns the job's place in claim order, as fail.sql does.
WITH snoozed AS (
    UPDATE jq_live_jobs j
    SET status = 'pending',
        available_at = $5 + $4,
        attempt_count = j.attempt_count - 1,
        lease_owner = NULL,
        lease_expires_at = NULL
    WHERE j.id = $1
      AND j.status OPERATOR(pg_catalog.=) $6::jq_status
      AND j.lease_owner = $2
      AND j.lease_token = $3
      AND j.lease_expires_at > $5
    RETURNING j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id) AS queue_name,
              j.attempt_count, j.lease_token, j.priority, j.available_at, j.ordering_key IS NOT NULL AS ordered
), logged AS (
    -- The attempt the event names is the one snoozed, which the job no longer counts.
    INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token)
    SELECT s.id, s.queue_name, 'snoozed', 'pending', $5, s.attempt_count + 1, $2, s.lease_token
    FROM snoozed s
)
SELECT s.queue_name, s.priority, s.available_at, s.ordered
FROM snoozed s
