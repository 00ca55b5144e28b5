-- $1 job id. One job, by id: the live table's primary key and each history partition's index on
-- id. No row: no such job, or not of a queue the role manages.
-- A payload, result or progress comes as its compact text, at most 65,536 characters of it, and
-- its whole length: the page indents and bounds it (a value nested ten thousand deep would make
-- jsonb_pretty's indentation hundreds of megabytes).
SELECT j.id, j.queue_name, j.status::text, j.attempt_count, j.max_attempts, j.priority,
       pg_catalog."left"(j.payload::text, 65536), pg_catalog."left"(j.result::text, 65536),
       pg_catalog."left"(j.progress::text, 65536),
       j.lease_owner, j.lease_token, j.lease_expires_at::text, j.expires_at::text,
       j.run_deadline::text, j.last_error_code, j.last_error_message, j.depends_on::text,
       j.awaiting, j.created_at::text, j.available_at::text, j.claimed_at::text,
       j.finished_at::text, j.dedup_key, j.ordering_key, j.concurrency_key,
       pg_catalog.length(j.payload::text), pg_catalog.length(j.result::text),
       pg_catalog.length(j.progress::text)
FROM jq_managed_jobs j
WHERE j.id OPERATOR(pg_catalog.=) $1
