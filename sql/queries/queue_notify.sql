-- $1 queue_name
-- The queue's notify setting; no row (a queue without settings) means on. Read through to_jsonb so
-- that a 0.2.0 library still runs against a 0.1.0 schema, which has no such column, until
-- ALTER EXTENSION UPDATE adds it (then as now: on).
SELECT coalesce((to_jsonb(q) ->> 'notify')::boolean, true) FROM jq_queues q WHERE q.queue_name = $1
