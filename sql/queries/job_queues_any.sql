-- $1 job_ids (bigint[])
-- The queue of each of these jobs, live or finished: for the jobs job_queues_live.sql did not
-- find (src/rights.rs, `usable_jobs`), and to count a refused report against its queue
-- (src/api/lease.rs). The history is read by its index on id, one probe per day partition. The
-- queue's name is looked up per job found, not joined: a join would let the plan start from the
-- queues and read each one's range of a day of history, which the planner's guesses for a day
-- without statistics (today's, filled since its last analyze) make look cheaper than the probes by
-- id (history.rs, a_job_of_the_history_is_found_by_its_id_in_a_day_without_statistics).
SELECT j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id OPERATOR(pg_catalog.=) j.queue_id)
FROM jq_live_jobs j
WHERE j.id OPERATOR(pg_catalog.=) ANY ($1)
UNION ALL
SELECT h.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id OPERATOR(pg_catalog.=) h.queue_id)
FROM jq_job_history h
WHERE h.id OPERATOR(pg_catalog.=) ANY ($1)
