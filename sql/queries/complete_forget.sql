-- $1 job_id, $2 worker, $3 lease_token, $4 now, $5 queue_id, $6 the text 'running'
-- The completion of a job of a queue that keeps no succeeded job (guide, "Queues that keep
-- nothing"), when the session knows the job's queue because it claimed the job (src/api/held.rs):
-- the guarded DELETE is all, and the job's events go with it. complete.sql does the same for any
-- job, deciding by the queue's settings inside the statement; this one has no plan node for the
-- settings or the history, whose start cost a completion more than the history row it saved
-- (bench/README.md, "Completions made for the job's queue").
--
-- The job must be of queue $5, as the session was told: a job of another queue is not completed
-- here, nor one that others depend on, which is kept all the same (guide, "Workflows"). Both are
-- then completed by complete.sql (src/api/lease.rs), as is a job whose lease no longer holds.
WITH done AS (
    DELETE FROM jq_live_jobs
    WHERE id = $1
      AND status OPERATOR(pg_catalog.=) $6::jq_status
      AND lease_owner = $2
      AND lease_token = $3
      AND lease_expires_at > $4
      AND queue_id = $5
      AND NOT EXISTS (SELECT FROM jq_job_dependencies x WHERE x.depends_on = $1)
    RETURNING queue_id, claimed_at, concurrency_key, depends_on
), events_gone AS (
    DELETE FROM jq_job_events e
    WHERE e.job_id = $1
      AND EXISTS (SELECT FROM done)
)
SELECT d.queue_id, d.claimed_at, d.concurrency_key IS NOT NULL, false, d.depends_on
FROM done d
