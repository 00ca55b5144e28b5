-- $1 depends_on (bigint[])
-- The jobs a new job would depend on, live or finished, with their queues: for the caller's right
-- on each (at least `monitor`) and to refuse an id that names no job, before anything is locked or
-- written (src/api/dependencies.rs). The history is read by its index on id, one probe per day
-- partition, as job_queues_any.sql does.
SELECT j.id, n.queue_name
FROM jq_live_jobs j
JOIN jq_queue_ids n ON n.queue_id = j.queue_id
WHERE j.id = ANY ($1)
UNION ALL
SELECT h.id, n.queue_name
FROM jq_job_history h
JOIN jq_queue_ids n ON n.queue_id = h.queue_id
WHERE h.id = ANY ($1)
