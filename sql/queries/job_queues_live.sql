-- $1 job_ids (bigint[])
-- The queue of each of these jobs that is still in jq_live_jobs (pending, running, dead or
-- cancelled), read before a verb touches any of them, so that its caller's right is checked on
-- the queue first (src/rights.rs, `usable_jobs`). A job only in the history, or in no table, has
-- no row here (job_queues_any.sql looks for those). Read without a lock, by the primary key.
SELECT j.id, n.queue_name
FROM jq_live_jobs j
JOIN jq_queue_ids n ON n.queue_id OPERATOR(pg_catalog.=) j.queue_id
WHERE j.id OPERATOR(pg_catalog.=) ANY ($1)
