-- $1 queue_name
-- Gives a queue its number on its first enqueue (see sql/schema/tables.sql, jq_queue_ids). Two
-- sessions doing it at once: one inserts, the other waits for it and inserts nothing.
INSERT INTO jq_queue_ids (queue_name) VALUES ($1) ON CONFLICT (queue_name) DO NOTHING
