-- $1 name, $2 cron, $3 time_zone, $4 queue_name, $5 payload, $6 priority, $7 max_attempts,
-- $8 dedup_key, $9 ordering_key, $10 concurrency_key, $11 catch_up, $12 catch_up_limit,
-- $13 paused, $14 next_run, $15 now, $16 the queue of the schedule as the caller found it locked
-- (NULL: there was none)
-- Creates the schedule, or replaces all of its settings; a replaced one keeps its last run and
-- last job, and its next run is counted afresh from now. A schedule of that name made by another
-- transaction since the caller looked (and so not checked against its rights) is not replaced:
-- no row comes back, and the caller looks again.
INSERT INTO jq_schedule_specs (name, cron, time_zone, queue_name, payload, priority, max_attempts,
                               dedup_key, ordering_key, concurrency_key, catch_up, catch_up_limit,
                               paused, next_run, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
ON CONFLICT (name) DO UPDATE
SET cron = excluded.cron, time_zone = excluded.time_zone, queue_name = excluded.queue_name,
    payload = excluded.payload, priority = excluded.priority, max_attempts = excluded.max_attempts,
    dedup_key = excluded.dedup_key, ordering_key = excluded.ordering_key,
    concurrency_key = excluded.concurrency_key, catch_up = excluded.catch_up,
    catch_up_limit = excluded.catch_up_limit, paused = excluded.paused, next_run = excluded.next_run
WHERE jq_schedule_specs.queue_name = $16
RETURNING 1
