-- $1 now
-- The day partitions of jq_job_history that every queue with jobs in them keeps no longer: the day
-- ended longer ago than each such queue's retention (7 days for a queue without a settings row; a
-- NULL retention keeps its days). Which queues a day holds is a skip scan of the day's index by
-- queue, one probe per queue, whatever the number of jobs. Each day comes with its qualified name.
WITH days AS (
    SELECT pg_catalog.format('%I.%I', n.nspname, c.relname) AS qualified,
           pg_catalog.to_date(pg_catalog.substr(c.relname, 16), 'YYYYMMDD')::timestamp AT TIME ZONE 'UTC' AS lo
    FROM pg_catalog.pg_inherits i
    JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE i.inhparent = 'jq_job_history'::pg_catalog.regclass::pg_catalog.oid
      AND c.relname ~ '^jq_job_history_[0-9]{8}$'::pg_catalog.text
)
SELECT d.qualified
FROM days d
WHERE d.lo + interval '24 hours' <= $1
  -- A day with a job that a pending or running job depends on is kept until those end (guide,
  -- "Workflows"); read from the few jobs that wait, by the history's index on id.
  AND NOT EXISTS (
      SELECT 1
      FROM jq_job_dependencies x
      JOIN jq_live_jobs c ON c.id = x.job_id
      JOIN jq_job_history h ON h.id = x.depends_on
      WHERE c.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[])
        AND h.finished_at >= d.lo AND h.finished_at < d.lo + interval '24 hours')
  AND NOT EXISTS (
      WITH RECURSIVE held AS (
          SELECT pg_catalog.min(h.queue_id) AS queue_id
          FROM jq_job_history h
          WHERE h.finished_at >= d.lo AND h.finished_at < d.lo + interval '24 hours'
          UNION ALL
          SELECT (SELECT pg_catalog.min(h.queue_id)
                  FROM jq_job_history h
                  WHERE h.queue_id > held.queue_id
                    AND h.finished_at >= d.lo AND h.finished_at < d.lo + interval '24 hours')
          FROM held
          WHERE held.queue_id IS NOT NULL
      )
      SELECT 1
      FROM held
      JOIN jq_queue_ids n ON n.queue_id = held.queue_id
      LEFT JOIN jq_queues q ON q.queue_name = n.queue_name
      WHERE held.queue_id IS NOT NULL
        AND NOT coalesce(d.lo + interval '24 hours'
                         <= $1 - CASE WHEN q.queue_name IS NULL THEN interval '7 days' ELSE q.retention END,
                         false))
ORDER BY d.lo
