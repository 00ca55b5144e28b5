-- $1 queue_name, $2 now; follows parts/pending_levels.sql
-- For a waiting claim of a queue with a concurrency limit, before it takes the queue's row lock
-- (claim_admit.sql): whether a slot is free and a job is claimable now, read without any lock. The
-- lock is held until the transaction ends; a claim that would find nothing must not take it and
-- then sleep. Returns no row for a queue without a limit or a paused one. The answer may be stale
-- by the time the lock is taken; the locked claim decides. Claimable jobs are looked for priority
-- by priority, those of `levels`.
SELECT q.concurrency_limit > (SELECT pg_catalog.count(*) FROM jq_live_jobs r
                              WHERE r.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
                                AND r.status OPERATOR(pg_catalog.=) 'running')
       AND EXISTS (
           SELECT 1
           FROM levels l
           CROSS JOIN LATERAL (
               SELECT 1
               FROM jq_live_jobs j
               WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
                 AND j.status OPERATOR(pg_catalog.=) 'pending'
                 AND j.awaiting = 0 AND j.concurrency_key IS NULL
                 AND j.priority >= l.priority AND j.priority <= l.priority
                 AND j.available_at <= $2
                 -- ordering key check
               LIMIT 1
           ) AS due
           -- Jobs with a concurrency key: whether there is one at all, as in claim_any_due.sql.
           UNION ALL
           SELECT 1 FROM jq_live_jobs j
           WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
             AND j.status OPERATOR(pg_catalog.=) 'pending'
             AND j.awaiting = 0 AND j.concurrency_key IS NOT NULL)
FROM jq_queues q
WHERE q.queue_name = $1 AND q.concurrency_limit IS NOT NULL AND NOT q.paused
