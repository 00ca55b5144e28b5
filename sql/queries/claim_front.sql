-- $1 queue_name, $2, $3, $4 where to look from (priority, available_at, id)
-- The claim front's look (see src/shared/front.rs): the first pending job in claim order from the
-- given key on, whether due or not, locked or not, and whether any live job of the queue has an
-- ordering key (those queues' fronts do not move). The same two ranges of the claim index as the
-- claim's priority order, so a look from the front skips what the front skips; a look from the
-- start visits every entry a snapshot keeps, which a front takes about once a second (the first
-- claim a second after the last such look).
SELECT f.priority, f.available_at, f.id,
       EXISTS (
           SELECT 1 FROM jq_live_jobs k
           WHERE k.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1) AND k.ordering_key IS NOT NULL
             AND k.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[])
       ) AS keyed
FROM (VALUES (1)) AS one
LEFT JOIN LATERAL (
    SELECT * FROM (
        SELECT * FROM (
            SELECT j.priority, j.available_at, j.id
            FROM jq_live_jobs j
            WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
              AND j.status OPERATOR(pg_catalog.=) 'pending'
              AND j.awaiting = 0 AND j.concurrency_key IS NULL
              -- Not `priority = $2`: the planner would drop a constant from the ORDER BY and may then pick
              -- the arrival-order index, filtering every priority; a closed range keeps the claim index.
              AND j.priority >= $2 AND j.priority <= $2
              AND (j.available_at, j.id) >= ($3, $4)
            ORDER BY j.priority DESC, j.available_at, j.id
            LIMIT 1
        ) AS at_front
        UNION ALL
        SELECT * FROM (
            SELECT j.priority, j.available_at, j.id
            FROM jq_live_jobs j
            WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
              AND j.status OPERATOR(pg_catalog.=) 'pending'
              AND j.awaiting = 0 AND j.concurrency_key IS NULL
              AND j.priority < $2
            ORDER BY j.priority DESC, j.available_at, j.id
            LIMIT 1
        ) AS below_front
    ) AS first
    LIMIT 1
) AS f ON true
