-- $1 job_id
-- Before a re-drive: the queue of a dead or cancelled job and its dedup key (NULL: none); no row
-- for any other job. jq_retry checks the caller's right on the queue first, then asks
-- enqueue_existing.sql whether a live job holds the key now and, if one does, names it (the
-- re-drive itself would fail on jq_live_jobs_dedup; src/api/redrive.rs). The index still decides a
-- race.
--
-- The job is found by its primary key alone (a subquery by id, then the state checked on that
-- row): with `id = $1 AND status IN ('dead', 'cancelled')` the planner may walk the whole index of
-- dead and cancelled jobs instead, whenever statistics say there are few (see complete.sql).
SELECT n.queue_name, j.dedup_key
FROM (SELECT * FROM jq_live_jobs WHERE id = $1 OFFSET 0) AS j
JOIN jq_queue_ids n ON n.queue_id = j.queue_id
WHERE j.status OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'cancelled']::jq_status[])
