-- $1 job, $2 how many of its dependencies just succeeded, or for a job that counts them in parts, how
-- many of its parts just reached 0; $3 now
-- dependencies_release.sql for a single job, the case of a completion in a chain or in the middle of
-- a large fan-in: one row to lock, in no order to keep, so no locking pass before the update, and a
-- plan of one UPDATE by key where that statement starts a CTE, a lock pass and a join
-- (`make bench-dag`, bench/README.md "Workflows").
UPDATE jq_live_jobs j
SET awaiting = j.awaiting - $2,
    available_at = CASE WHEN j.awaiting - $2 = 0 THEN greatest(j.available_at, $3) ELSE j.available_at END
WHERE j.id = $1
  AND j.status OPERATOR(pg_catalog.=) 'pending'
  AND j.awaiting >= $2
RETURNING j.id, j.queue_id,
          j.awaiting = 0 AS released, j.priority, j.available_at, j.ordering_key IS NOT NULL AS ordered,
          j.concurrency_key IS NOT NULL AS keyed
