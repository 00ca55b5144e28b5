-- $1 queue_name
-- The notify setting, for SQL definitions older than 0.3.0 (until ALTER EXTENSION UPDATE): read
-- through to_jsonb, so that it also runs against a 0.1.0 schema, which has no such column (then
-- as now: on).
SELECT coalesce((pg_catalog.to_jsonb(q) OPERATOR(pg_catalog.->>) 'notify')::boolean, true)
FROM jq_queues q WHERE q.queue_name = $1
