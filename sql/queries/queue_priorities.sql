-- $1 queue_name
-- The queue has had a job with a priority other than 0 (see src/api/settings.rs): from now on its
-- claims walk every priority. Set once; a second enqueue that gets here first waits for the first
-- and then changes nothing.
UPDATE jq_queue_ids SET priorities = true
WHERE queue_name = $1 AND NOT priorities
