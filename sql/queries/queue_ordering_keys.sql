-- $1 queue_name
-- The queue has had a job with an ordering key (see src/api/settings.rs): from now on its claims
-- check ordering keys. Set once; a second enqueue that gets here first waits for the first and
-- then changes nothing.
UPDATE jq_queue_ids SET ordering_keys = true
WHERE queue_name = $1 AND NOT ordering_keys
