-- $1 queue_name
-- Jobs of the queue running now, counted in a snapshot taken after the caller took the queue's row
-- lock (claim_admit.sql), so every limited claim that committed before is included.
SELECT pg_catalog.count(*) FROM jq_live_jobs WHERE queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1) AND status OPERATOR(pg_catalog.=) 'running'
