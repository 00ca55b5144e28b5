-- $1 job_id
-- A job's outcome, whichever table holds it (README, "Results and waiting"): its queue, whether it
-- has finished (succeeded, dead or cancelled), and the columns of jq_result. No row: no such job,
-- or it was pruned. A job moves between the tables only inside one statement, so the snapshot sees
-- it exactly once; each table is read by its index on id.
SELECT n.queue_name, j.status OPERATOR(pg_catalog.<>) ALL (ARRAY['pending', 'running']::jq_status[]),
       j.status, NULL::jsonb, j.last_error_code, j.last_error_message, j.finished_at
FROM jq_live_jobs j
JOIN jq_queue_ids n ON n.queue_id = j.queue_id
WHERE j.id = $1
UNION ALL
SELECT n.queue_name, true, 'succeeded'::jq_status, h.result, h.last_error_code, h.last_error_message,
       h.finished_at
FROM jq_job_history h
JOIN jq_queue_ids n ON n.queue_id = h.queue_id
WHERE h.id = $1
LIMIT 1
