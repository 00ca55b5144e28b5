-- $1 job_ids, $2 worker, $3 lease_tokens (the token of each job, in the same order), $4 now,
-- $5 the text 'running', $6 queue_id
-- complete_forget.sql for a batch (jq_complete_batch), when the session claimed every job of it
-- from one queue that keeps no succeeded job (src/api/held.rs): each job whose lease holds is
-- deleted, with its events. Not a job of another queue, nor one that others depend on: those,
-- and the jobs whose lease no longer holds, go on to complete_batch.sql (src/api/lease.rs).
WITH done AS (
    DELETE FROM jq_live_jobs j
    USING ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($3::bigint[])) AS given(id, lease_token)
    WHERE j.id = given.id
      AND j.status OPERATOR(pg_catalog.=) $5::jq_status
      AND j.lease_owner = $2
      AND j.lease_token = given.lease_token
      AND j.lease_expires_at > $4
      AND j.queue_id = $6
      AND NOT EXISTS (SELECT FROM jq_job_dependencies x WHERE x.depends_on = j.id)
    RETURNING j.id, j.queue_id, j.claimed_at, j.concurrency_key, j.depends_on
), events_gone AS (
    DELETE FROM jq_job_events e
    USING done d
    WHERE e.job_id = d.id
)
SELECT d.id, d.queue_id, d.claimed_at, d.concurrency_key IS NOT NULL, false, d.depends_on
FROM done d
