-- $1 queue_name, $2 concurrency_key, $3 settings: a jsonb object whose keys the caller checked
-- Sets the key's settings named in $3 (a JSON null sets NULL) and keeps the others; the table's
-- constraints refuse a bad value. Returns the key's settings after the change.
UPDATE jq_key_settings s
SET (concurrency_limit, weight) = (SELECT r.concurrency_limit, r.weight FROM pg_catalog.jsonb_populate_record(s, $3) r)
WHERE s.queue_name = $1 AND s.concurrency_key = $2
RETURNING pg_catalog.to_jsonb(s) OPERATOR(pg_catalog.-) ARRAY['queue_name', 'concurrency_key']
