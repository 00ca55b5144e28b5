-- $1 job_id
-- Before a re-drive: for a dead or cancelled job with a dedup key, its queue, the key, and the live
-- (pending or running) job that holds the key now, if another one does. No row for any other job.
-- The re-drive would fail on jq_live_jobs_dedup; this lets jq_retry check the caller's right on the
-- queue first and then name the holder (src/api/redrive.rs). The index still decides a race.
--
-- The job is found by its primary key alone (a subquery by id, then the state checked on that
-- row): with `id = $1 AND status IN ('dead', 'cancelled')` the planner may walk the whole index of
-- dead and cancelled jobs instead, whenever statistics say there are few (see complete.sql).
SELECT n.queue_name, j.dedup_key,
       (SELECT k.id FROM jq_live_jobs k
        WHERE k.queue_id = j.queue_id AND k.dedup_key = j.dedup_key
          AND k.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[])
        LIMIT 1) AS holder
FROM (SELECT * FROM jq_live_jobs WHERE id = $1 OFFSET 0) AS j
JOIN jq_queue_ids n ON n.queue_id = j.queue_id
WHERE j.dedup_key IS NOT NULL
  AND j.status OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'cancelled']::jq_status[])
