-- $1 queue_name, $2 now
-- Whether the queue has a pending job that is due: what a waiting claim asks before it writes the
-- first token epoch of a server lifetime, so that a look that would claim nothing writes nothing
-- (and need not return to commit it). One probe of the arrival-order index of pending jobs.
SELECT EXISTS (
    SELECT 1 FROM jq_live_jobs j
    WHERE j.queue_name = $1 AND j.status OPERATOR(pg_catalog.=) 'pending' AND j.available_at <= $2
)
