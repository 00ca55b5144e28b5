-- $1 now, $2 max_schedules
-- The tick pass (src/api/schedules.rs): schedules whose next tick has come, soonest first, each
-- locked until the pass commits. A row another ticker holds is skipped: that ticker makes the
-- tick; and a row a ticker moved on since this snapshot is re-read under its lock and no longer
-- due, so each tick is made once.
SELECT s.name, s.cron, s.time_zone, s.queue_name, s.payload, s.priority, s.max_attempts,
       s.dedup_key, s.ordering_key, s.concurrency_key, s.catch_up, s.catch_up_limit, s.next_run
FROM jq_schedule_specs s
WHERE NOT s.paused AND s.next_run <= $1
ORDER BY s.next_run
LIMIT $2
FOR UPDATE SKIP LOCKED
