-- $1 queue_name, $2 error_code (NULL: any), $3 max_jobs, $4 now
-- Re-drives up to $3 dead jobs of the queue, those that died longest ago first. As in reap.sql, the
-- UPDATE finds its rows by primary key, and the event's attempt count (the one before the re-drive)
-- comes from a RETURNING subquery, which still sees the row as it was.
WITH picked AS (
    SELECT j.id
    FROM jq_live_jobs j
    WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
      AND j.status OPERATOR(pg_catalog.=) 'dead'
      AND ($2::text IS NULL OR j.last_error_code = $2)
      -- A job whose dedup key a newer live job holds stays dead: re-driving it would break dedup.
      AND (j.dedup_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM jq_live_jobs l
            WHERE l.queue_id = j.queue_id AND l.dedup_key = j.dedup_key
              AND l.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[])))
    ORDER BY j.finished_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), redriven AS (
    UPDATE jq_live_jobs j
    SET status = 'pending',
        available_at = $4,
        attempt_count = 0,
        finished_at = NULL
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
      AND j.status OPERATOR(pg_catalog.=) 'dead'
    RETURNING j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id) AS queue_name, j.lease_token,
              (SELECT o.attempt_count FROM jq_live_jobs o WHERE o.id = j.id) AS attempt_count
)
INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, lease_token)
SELECT r.id, r.queue_name, 'retried', 'pending', $4, r.attempt_count, r.lease_token
FROM redriven r
RETURNING job_id
