-- $1 queue_name
-- What a claim or an enqueue applies of a queue, read once per session and kept until jq_queues,
-- jq_queue_ids or jq_key_settings change (src/api/settings.rs): the queue's number (NULL before its
-- first enqueue), whether it has ever had a job with an ordering key, and whether one with a
-- priority other than 0;
-- then its settings, a queue without a row having the tables' defaults (the queue's max_attempts
-- last); then each rate limit with its period in microseconds (as interval comparison counts them:
-- a month is 30 days); its notify setting (NULL: while someone listens); whether it keeps succeeded
-- jobs; its key_concurrency_limit and whether it has rows in jq_key_settings (a key's own limit or
-- weight); and the three tables' oids, whose invalidations say a setting changed.
SELECT n.queue_id,
       coalesce(n.ordering_keys, false),
       coalesce(n.priorities, false),
       coalesce(q.default_lease, interval '60 seconds'),
       q.max_runtime,
       coalesce(q.paused, false),
       q.concurrency_limit,
       CASE WHEN q.queue_name IS NULL THEN interval '5 minutes' ELSE q.starvation_limit END,
       (extract(epoch FROM CASE WHEN q.queue_name IS NULL THEN interval '5 minutes'
                                ELSE q.starvation_limit END) * 1000000::numeric)::bigint,
       q.rate_limit, (extract(epoch FROM q.rate_period) * 1000000::numeric)::bigint,
       q.key_rate_limit, (extract(epoch FROM q.key_rate_period) * 1000000::numeric)::bigint,
       q.notify,
       coalesce(q.max_attempts, 8),
       coalesce(q.keep_succeeded, true),
       q.key_concurrency_limit,
       EXISTS (SELECT FROM jq_key_settings s WHERE s.queue_name = $1),
       'jq_queues'::pg_catalog.regclass::pg_catalog.oid,
       'jq_queue_ids'::pg_catalog.regclass::pg_catalog.oid,
       'jq_key_settings'::pg_catalog.regclass::pg_catalog.oid
FROM (VALUES (1)) AS one
LEFT JOIN jq_queues q ON q.queue_name = $1
LEFT JOIN jq_queue_ids n ON n.queue_name = $1
