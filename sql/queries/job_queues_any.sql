-- $1 job_ids (bigint[])
-- The queue of each of these jobs, live or finished: for the jobs job_queues_live.sql did not
-- find (src/rights.rs, `usable_jobs`), and to count a refused report against its queue
-- (src/api/lease.rs). The history is read by its index on id, one probe per day partition.
SELECT j.id, n.queue_name
FROM jq_live_jobs j
JOIN jq_queue_ids n ON n.queue_id OPERATOR(pg_catalog.=) j.queue_id
WHERE j.id OPERATOR(pg_catalog.=) ANY ($1)
UNION ALL
SELECT h.id, n.queue_name
FROM jq_job_history h
JOIN jq_queue_ids n ON n.queue_id OPERATOR(pg_catalog.=) h.queue_id
WHERE h.id OPERATOR(pg_catalog.=) ANY ($1)
