-- $1 queue_id
-- The name of a queue by its number (src/api/settings.rs keeps it for the session).
SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = $1
