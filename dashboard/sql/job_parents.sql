-- $1 job id. The jobs it depends on, in the order it named them (guide, "Workflows"), each result
-- as at most 4,096 characters of its compact text, and its whole length (the page bounds what it
-- shows: a job may depend on up to pg_jobqueue.max_batch_size jobs).
SELECT p.job_id, p.status::text, pg_catalog."left"(p.result::text, 4096), pg_catalog.length(p.result::text)
FROM jq_parent_results($1) p
