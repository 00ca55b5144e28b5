-- $1 queue_name. The queue's concurrency keys with claimable or running jobs: how many of each,
-- so that a key at its limit shows (guide, "Flow control"). Pending and running jobs only: the
-- finished_at test is pushed below the view's row filter and prunes the history to its default
-- partition, read through its index, so no history is read.
SELECT j.concurrency_key,
       pg_catalog.count(*) FILTER (WHERE j.status::text OPERATOR(pg_catalog.=) 'pending'
                                     AND j.available_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()
                                     AND j.awaiting OPERATOR(pg_catalog.=) 0) AS due,
       pg_catalog.count(*) FILTER (WHERE j.status::text OPERATOR(pg_catalog.=) 'running'
                                     AND j.lease_expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()) AS running
FROM jq_managed_jobs j
WHERE j.queue_name OPERATOR(pg_catalog.=) $1
  AND j.finished_at IS NULL
  AND j.concurrency_key IS NOT NULL
GROUP BY j.concurrency_key
ORDER BY j.concurrency_key
LIMIT 200
