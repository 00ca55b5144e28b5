-- $1 job_id, $2 worker, $3 lease_token, $4 now, $5 result (NULL: none), $6 the text 'running'
-- A completed job leaves the hot table for the history (guide, "Storage"): one guarded DELETE,
-- whose rows the same statement inserts into jq_job_history, so the job is in exactly one of the
-- two whenever anyone looks.
--
-- The row is found by its primary key alone. The status is compared with a parameter, $6 (the
-- text 'running'), not written out: written out, it would prove the predicate of the index of
-- running jobs, and a generic plan might walk that whole index instead, whenever statistics say few
-- jobs run (the bench saw 0.5 ms per call with 2,000 running). These statements only ever run with
-- a generic plan (src/db/plans.rs), and the plan tests check each. A row updated since the
-- statement's snapshot (a heartbeat committed meanwhile) is re-read and every condition re-checked
-- on its newest version (EvalPlanQual): found by a ctid from a subquery instead, the newest version
-- has another ctid, and the row was skipped.
--
-- A job of a queue that keeps no succeeded job (keep_succeeded false) is not kept: the DELETE is
-- all, and its events go with it. That takes a look at the queue's settings and a delete from
-- jq_job_events, which a completion needs only while some queue keeps nothing: while none does,
-- src/api/lease.rs runs this statement without the "keep nothing" sections.
WITH done AS (
    DELETE FROM jq_live_jobs
    WHERE id = $1
      AND status OPERATOR(pg_catalog.=) $6::jq_status
      AND lease_owner = $2
      AND lease_token = $3
      AND lease_expires_at > $4
    RETURNING *
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
           d.expires_at, d.progress, $5, d.depends_on
    FROM done d
-- keep nothing: begin
    WHERE d.id <> ALL (ARRAY(SELECT f.id FROM forgotten f))
), events_gone AS (
    DELETE FROM jq_job_events e
    WHERE e.job_id = ANY (ARRAY(SELECT f.id FROM forgotten f))
-- keep nothing: end
)
-- For the counters: the queue's number, and the claim time its running time is measured from; and
-- whether the job had a concurrency key, whose slot it frees (waiting claims are woken).
-- And for workflows (guide, "Workflows"): whether jobs wait for this one, and what it waited for.
SELECT d.queue_id, d.claimed_at, d.concurrency_key IS NOT NULL,
       EXISTS (SELECT FROM jq_job_dependencies x WHERE x.depends_on = d.id AND NOT x.settled), d.depends_on
FROM done d
