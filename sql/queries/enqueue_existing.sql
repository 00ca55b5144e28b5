-- $1 queue_name, $2 dedup_key: the live job that holds the key, if it is still live.
SELECT j.id
FROM jq_live_jobs j
WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
  AND j.dedup_key = $2 AND j.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[])
