-- $1 queue_name. Every setting of the queue, for a role with `manage`: jq_configure with no change
-- returns them. It writes the queue's row when there is none, so it runs in a transaction that
-- is rolled back.
SELECT s.key, s.value
FROM pg_catalog.jsonb_each_text(jq_configure($1, '{}'::jsonb)) s
ORDER BY s.key
