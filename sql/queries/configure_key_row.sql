-- $1 queue_name, $2 concurrency_key
-- A settings row with the defaults, for a key that has none yet.
INSERT INTO jq_key_settings (queue_name, concurrency_key) VALUES ($1, $2)
ON CONFLICT (queue_name, concurrency_key) DO NOTHING
