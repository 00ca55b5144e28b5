-- $1 name
-- A schedule's queue, expression and zone, locked against a concurrent change until this
-- transaction ends: its caller checks the right on that queue, then changes the row.
SELECT s.queue_name, s.cron, s.time_zone
FROM jq_schedule_specs s
WHERE s.name = $1
FOR UPDATE
