-- $1 queue_name, $2 paused. Pauses or resumes the queue; 42501 without `manage`.
SELECT jq_configure($1, pg_catalog.jsonb_build_object('paused', $2::boolean)) OPERATOR(pg_catalog.->>) 'paused'
