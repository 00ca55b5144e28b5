-- $1 queue_name
-- A settings row with the defaults, for a queue that has none yet.
INSERT INTO jq_queues (queue_name) VALUES ($1) ON CONFLICT (queue_name) DO NOTHING
