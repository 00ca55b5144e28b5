-- $1 queue names (text[]; NULL: every queue the role manages), $2 how many, newest first.
-- Candidates for the dead and cancelled jobs: every death and cancellation writes an event
-- (guide, "Tables and views"). The jobs are then read by id (finished_jobs.sql), through the
-- indexes on id: a status test on jq_managed_jobs would read the whole history (see
-- queue_jobs.sql), the events hold only failures, expiries and cancellations.
SELECT e.job_id
FROM jq_managed_job_events e
WHERE e.event OPERATOR(pg_catalog.=) ANY ('{failed,lease_expired,cancelled}'::text[])
  AND ($1::text[] IS NULL OR e.queue_name OPERATOR(pg_catalog.=) ANY ($1::text[]))
GROUP BY e.job_id
ORDER BY e.job_id DESC
LIMIT $2
