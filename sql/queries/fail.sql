-- $1 job_id, $2 worker, $3 lease_token, $4 error_code, $5 error_message, $6 retryable,
-- $7 retry_in (NULL: backoff), $8 now, $9 the text 'running'
-- The guarded transition and its audit row in one statement: no event without the transition.
-- Returns the job's place in claim order too: a job pending again lowers its queue's claim front.
-- The row is found by its primary key alone. The status is compared with a parameter, $9 (the
-- text 'running'), not written out: written out, it would prove the predicate of the index of
-- running jobs, and a generic plan might walk that whole index instead, whenever statistics say few
-- jobs run (the bench saw 0.5 ms per call with 2,000 running). These statements only ever run with
-- a generic plan (src/db/plans.rs), and the plan tests check each. A row updated since the
-- statement's snapshot (a workflow's enqueue marks the jobs it depends on) is re-read and every
-- condition re-checked on its newest version (EvalPlanQual): found by a ctid from a subquery
-- instead, the newest version has another ctid, and the row was skipped (guide, "Workflows").
WITH failed AS (
    UPDATE jq_live_jobs j
    SET status = CASE WHEN $6 AND j.attempt_count < j.max_attempts
                      THEN 'pending' ELSE 'dead' END::jq_status,
        available_at = CASE WHEN $6 AND j.attempt_count < j.max_attempts
                            THEN $8 + coalesce($7, jq_backoff((SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id), j.attempt_count))
                            ELSE j.available_at END,
        finished_at = CASE WHEN $6 AND j.attempt_count < j.max_attempts THEN NULL ELSE $8 END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        last_error_code = $4,
        last_error_message = $5
    WHERE j.id = $1
      AND j.status OPERATOR(pg_catalog.=) $9::jq_status
      AND j.lease_owner = $2
      AND j.lease_token = $3
      AND j.lease_expires_at > $8
    RETURNING j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id) AS queue_name, j.status, j.attempt_count, j.lease_token, j.priority, j.available_at,
              j.ordering_key IS NOT NULL AS keyed,
              EXISTS (SELECT FROM jq_job_dependencies x WHERE x.depends_on = j.id AND NOT x.settled) AS dependents
), logged AS (
    -- Runs whether or not the result below reads it, as every data-modifying WITH does.
    INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token,
                               error_code, error_message)
    SELECT f.id, f.queue_name, 'failed', f.status, $8, f.attempt_count, $2, f.lease_token, $4, $5
    FROM failed f
)
-- And whether jobs depend on it: a death cancels them (guide, "Workflows").
SELECT f.id, f.queue_name, f.status OPERATOR(pg_catalog.=) 'dead' AS dead, f.priority, f.available_at, f.keyed,
       f.dependents
FROM failed f
