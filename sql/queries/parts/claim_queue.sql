-- The start of the claim statements (src/api/claim/take.rs joins them): `queue`, the queue's number and
-- the settings a claim applies. Parameters as in claim.sql.
WITH RECURSIVE queue AS (
    SELECT (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1) AS id,
           coalesce($3, q.default_lease, interval '60 seconds') AS lease,
           q.max_runtime,
           NOT coalesce(q.paused, false) AND (q.concurrency_limit IS NULL OR $6) AS open,
-- fairness: begin
           (extract(epoch FROM CASE WHEN q.queue_name IS NULL THEN interval '5 minutes'
                                    ELSE q.starvation_limit END) * 1000000::numeric)::bigint AS starvation_limit_us,
-- fairness: end
           -- Jobs available before this are starving. A queue without a row has the default limit;
           -- a NULL limit means none, and '-infinity' then matches no job.
           coalesce($5 - CASE WHEN q.queue_name IS NULL THEN interval '5 minutes'
                              ELSE q.starvation_limit END,
                    '-infinity') AS starving_before
    FROM (VALUES (1)) AS one
    LEFT JOIN jq_queues q ON q.queue_name = $1
