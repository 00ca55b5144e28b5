-- $1 job_ids, $2 worker, $3 lease_tokens (same length as $1, pairwise), $4 now,
-- $5 the text 'running', as a parameter (see below), $6 results (NULL, or pairwise with $1: each job's
-- result; ROWS FROM pads a NULL array's column with NULLs)
-- jq_complete for many jobs in one statement: each job is completed under complete.sql's guard and
-- moved to the history as there, and a job whose guard fails is left as it is. An id given twice
-- is completed once (src/api/lease.rs refuses that when results are given).
--
-- Each row is found by primary key. Written `status = 'running'`, the guard would let the planner
-- walk the whole index of running jobs instead, whenever statistics say few jobs run (see
-- complete.sql). Compared with a parameter, the status no longer proves that index's predicate:
-- this statement only ever runs with a generic plan (src/db/plans.rs), and the plan test checks it.
-- The "keep nothing" sections are left out while no queue keeps nothing, as in complete.sql.
WITH done AS (
    DELETE FROM jq_live_jobs j
    USING ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($3::bigint[]),
                     pg_catalog.unnest($6::jsonb[])) AS given(id, lease_token, result)
    WHERE j.id = given.id
      AND j.status OPERATOR(pg_catalog.=) $5::jq_status
      AND j.lease_owner = $2
      AND j.lease_token = given.lease_token
      AND j.lease_expires_at > $4
    RETURNING j.*, given.result
-- keep nothing: begin
), forgotten AS (
    -- The jobs of queues that keep no succeeded job (guide, "Queues that keep nothing").
    SELECT d.id
    FROM done d
    JOIN jq_queue_ids n ON n.queue_id = d.queue_id
    JOIN jq_queues q ON q.queue_name = n.queue_name
    WHERE NOT q.keep_succeeded
      -- A job others depend on is kept all the same, for them to read (guide, "Workflows").
      AND NOT EXISTS (SELECT FROM jq_job_dependencies x WHERE x.depends_on = d.id)
-- keep nothing: end
), kept AS (
    INSERT INTO jq_job_history
    SELECT d.id, d.queue_id, d.payload, d.priority, d.available_at, d.attempt_count, d.max_attempts,
           d.lease_token, d.lease_length, d.claimed_at, d.run_deadline, d.last_error_code,
           d.last_error_message, d.dedup_key, d.ordering_key, d.created_at, $4, d.concurrency_key,
           d.expires_at, d.progress, d.result, d.depends_on
    FROM done d
-- keep nothing: begin
    WHERE d.id <> ALL (ARRAY(SELECT f.id FROM forgotten f))
), events_gone AS (
    DELETE FROM jq_job_events e
    WHERE e.job_id = ANY (ARRAY(SELECT f.id FROM forgotten f))
-- keep nothing: end
)
-- And for workflows, as in complete.sql.
SELECT d.id, d.queue_id, d.claimed_at, d.concurrency_key IS NOT NULL,
       EXISTS (SELECT FROM jq_job_dependencies x WHERE x.depends_on = d.id AND NOT x.settled), d.depends_on
FROM done d
