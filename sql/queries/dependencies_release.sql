-- $1 jobs (bigint[]), $2 how many of each one's dependencies just succeeded, or for a job that
-- counts them in parts, how many of its parts just reached 0 (int[]); $3 now
-- Each pending job waits for that many fewer; one that waits for none is claimable from now
-- (guide, "Workflows"), in the claim order of its priority and of when it became claimable, which
-- its `available_at` says from now on (a later run_at stays). Two completions counting down one job
-- at once: the second waits for the first's lock and re-reads the row (READ COMMITTED), so exactly
-- one of them brings it to zero.
--
-- The lock filters on the status only: `awaiting > 0` there would let a plan made while the table
-- was small read the index of held jobs (sql/schema/tables.sql) whole instead of the primary key.
-- The update does not count a job down past 0 (`awaiting >= done`, which no index predicate
-- matches): each job here waits for at least what it is counted down by, and a count that said
-- otherwise leaves the job held, where jq_queue_stats shows it, rather than out of every index.
--
-- The rows are locked in the order of their ids before the update: two completions whose jobs have
-- dependents in common would otherwise lock them in whatever order their plans visit them, and
-- could each wait for the other (a deadlock). Every statement here that locks many jobs
-- (dependencies_cancel.sql too) locks them in that order, and locks rows of jq_job_dependencies
-- (dependencies_settle.sql), then parts (dependencies_count_parts.sql), before jobs. A job that is
-- not pending is neither locked nor updated here: a re-drive that holds its lock (the one statement
-- that takes rows and parts after a job's lock, dependencies_relink.sql) counts it again
-- (dependencies_await.sql), and this completion, which saw it cancelled, never waits for it.
WITH given AS (
    SELECT g.job_id, g.done
    FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::int[])) AS g(job_id, done)
), locked AS MATERIALIZED (
    SELECT j.id
    FROM jq_live_jobs j
    WHERE j.id = ANY ($1)
      AND j.status OPERATOR(pg_catalog.=) 'pending'
    ORDER BY j.id
    FOR UPDATE OF j
)
UPDATE jq_live_jobs j
SET awaiting = j.awaiting - g.done,
    available_at = CASE WHEN j.awaiting - g.done = 0 THEN greatest(j.available_at, $3) ELSE j.available_at END
FROM given g
WHERE j.id = ANY (ARRAY(SELECT l.id FROM locked l))
  AND j.id = g.job_id
  AND j.status OPERATOR(pg_catalog.=) 'pending'
  AND j.awaiting >= g.done
RETURNING j.id, j.queue_id,
          j.awaiting = 0 AS released, j.priority, j.available_at, j.ordering_key IS NOT NULL AS ordered,
          j.concurrency_key IS NOT NULL AS keyed
