-- $1 queue_name, $2 now; follows parts/pending_levels.sql
-- Microseconds until the queue's earliest scheduled job (run_at or backoff) becomes claimable; no row
-- when none is scheduled. A waiting claim sleeps no longer than this. For each priority of
-- `levels`, its first job not yet due: two probes per priority in all.
SELECT (extract(epoch FROM pg_catalog.min(d.available_at) - $2) * 1000000::numeric)::bigint
FROM levels l
CROSS JOIN LATERAL (
    SELECT j.available_at
    FROM jq_live_jobs j
    WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
      AND j.status OPERATOR(pg_catalog.=) 'pending'
      AND j.awaiting = 0 AND j.concurrency_key IS NULL
      AND j.priority >= l.priority AND j.priority <= l.priority
      AND j.available_at > $2
    ORDER BY j.priority DESC, j.available_at, j.id
    LIMIT 1
) AS d
HAVING pg_catalog.min(d.available_at) IS NOT NULL
