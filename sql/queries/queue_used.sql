-- $1 queue_name, $2 a new job of it has an ordering key, $3 one has a priority other than 0
-- What the queue has had (see src/api/settings.rs): a job with an ordering key, from when on its
-- claims check ordering keys; a job of a priority other than 0, from when on they walk every
-- priority. Each is set once; a second enqueue that gets here first waits for the first and then
-- changes nothing.
UPDATE jq_queue_ids
SET ordering_keys = ordering_keys OR $2,
    priorities = priorities OR $3
WHERE queue_name = $1
  AND ((NOT ordering_keys AND $2) OR (NOT priorities AND $3))
