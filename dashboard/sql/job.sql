-- $1 job id. One job, by id: the live table's primary key and each history partition's index on
-- id. No row: no such job, or not of a queue the role manages.
SELECT j.id, j.queue_name, j.status::text, j.attempt_count, j.max_attempts, j.priority,
       pg_catalog.jsonb_pretty(j.payload), pg_catalog.jsonb_pretty(j.result),
       pg_catalog.jsonb_pretty(j.progress),
       j.lease_owner, j.lease_token, j.lease_expires_at::text, j.expires_at::text,
       j.run_deadline::text, j.last_error_code, j.last_error_message, j.depends_on::text,
       j.awaiting, j.created_at::text, j.available_at::text, j.claimed_at::text,
       j.finished_at::text, j.dedup_key, j.ordering_key, j.concurrency_key
FROM jq_managed_jobs j
WHERE j.id OPERATOR(pg_catalog.=) $1
