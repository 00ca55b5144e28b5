-- $1 job_id, $2 whether a job that is gone succeeded (jq_await, for a job it saw unfinished in a
-- queue that keeps no succeeded job: guide, "Queues that keep nothing")
-- A job's outcome, whichever table holds it (guide, "Results and waiting"): its queue, whether it
-- has finished (succeeded, dead or cancelled), the columns of jq_result, and whether its queue
-- keeps succeeded jobs. No row: no such job, or it was pruned (unless $2). A job moves between the
-- tables only inside one statement, so the snapshot sees it exactly once; each table is read by
-- its index on id.
WITH found AS (
    SELECT n.queue_name, j.status OPERATOR(pg_catalog.<>) ALL (ARRAY['pending', 'running']::jq_status[]),
           j.status, NULL::jsonb, j.last_error_code, j.last_error_message, j.finished_at,
           coalesce((SELECT q.keep_succeeded FROM jq_queues q WHERE q.queue_name = n.queue_name), true)
    FROM jq_live_jobs j
    JOIN jq_queue_ids n ON n.queue_id = j.queue_id
    WHERE j.id = $1
    UNION ALL
    SELECT n.queue_name, true, 'succeeded'::jq_status, h.result, h.last_error_code, h.last_error_message,
           h.finished_at, true
    FROM jq_job_history h
    JOIN jq_queue_ids n ON n.queue_id = h.queue_id
    WHERE h.id = $1
    LIMIT 1
)
SELECT * FROM found
UNION ALL
SELECT NULL, true, 'succeeded'::jq_status, NULL, NULL, NULL, NULL, false
WHERE $2 AND NOT EXISTS (SELECT FROM found)
