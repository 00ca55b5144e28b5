-- $1 name
-- A schedule's queue, read without a lock before its caller's right on that queue is checked
-- (src/api/schedules.rs): a caller without it must not lock or change the row. No row: no such
-- schedule.
SELECT s.queue_name FROM jq_schedule_specs s WHERE s.name OPERATOR(pg_catalog.=) $1
