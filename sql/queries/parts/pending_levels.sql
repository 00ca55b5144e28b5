-- $1 queue_name
-- The start of a statement, which claim_any_due.sql, claim_next_due.sql and claim_slot_free.sql
-- each go on from (src/api/claim/ and src/api/wait.rs join them): `levels`, each priority that
-- has pending jobs in the queue, from the highest down, with its oldest pending job. One probe of
-- the claim index each, a skip scan: the first entry below the priority before (see claim.sql).
WITH RECURSIVE levels AS (
    SELECT f.priority, f.available_at
    FROM (
        SELECT j.priority, j.available_at
        FROM jq_live_jobs j
        WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
          AND j.status OPERATOR(pg_catalog.=) 'pending'
          AND j.awaiting = 0 AND j.concurrency_key IS NULL
        ORDER BY j.priority DESC, j.available_at, j.id
        LIMIT 1
    ) AS f
    UNION ALL
    SELECT n.priority, n.available_at
    FROM levels l
    CROSS JOIN LATERAL (
        SELECT j.priority, j.available_at
        FROM jq_live_jobs j
        WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
          AND j.status OPERATOR(pg_catalog.=) 'pending'
          AND j.awaiting = 0 AND j.concurrency_key IS NULL
          AND j.priority < l.priority
        ORDER BY j.priority DESC, j.available_at, j.id
        LIMIT 1
    ) AS n
)
