-- $1 job_id, $2 worker, $3 lease_token, $4 extend (NULL: the claimed lease length), $5 now,
-- $6 the text 'running'
-- Changes only lease_expires_at, which no index covers: a HOT update.
-- The row is found by its primary key alone. The status is compared with a parameter, $6 (the
-- text 'running'), not written out: written out, it would prove the predicate of the index of
-- running jobs, and a generic plan might walk that whole index instead, whenever statistics say few
-- jobs run (the bench saw 0.5 ms per call with 2,000 running). These statements only ever run with
-- a generic plan (src/db/plans.rs), and the plan tests check each. A row updated since the
-- statement's snapshot (a workflow's enqueue marks the jobs it depends on) is re-read and every
-- condition re-checked on its newest version (EvalPlanQual): found by a ctid from a subquery
-- instead, the newest version has another ctid, and the row was skipped (guide, "Workflows").
UPDATE jq_live_jobs
SET lease_expires_at = least($5 + coalesce($4, lease_length), run_deadline)
WHERE id = $1
  AND status OPERATOR(pg_catalog.=) $6::jq_status
  AND lease_owner = $2
  AND lease_token = $3
  AND lease_expires_at > $5
RETURNING (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = jq_live_jobs.queue_id)
