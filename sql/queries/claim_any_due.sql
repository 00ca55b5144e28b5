-- $1 queue_name, $2 now; follows parts/pending_levels.sql
-- Whether the queue has a pending job that is due: what a waiting claim asks before it writes the
-- first token epoch of a server lifetime, so that a look that would claim nothing writes nothing
-- (and need not return to commit it). The oldest pending job of each priority, until one is due;
-- for jobs with a concurrency key, whether there is one at all (one probe of the key claim index,
-- rather than one per key).
SELECT EXISTS (SELECT 1 FROM levels l WHERE l.available_at <= $2)
    OR EXISTS (SELECT 1 FROM jq_live_jobs j
               WHERE j.queue_id = (SELECT n.queue_id FROM jq_queue_ids n WHERE n.queue_name = $1)
                 AND j.status OPERATOR(pg_catalog.=) 'pending'
                 AND j.awaiting = 0 AND j.concurrency_key IS NOT NULL)
