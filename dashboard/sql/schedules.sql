-- Every schedule of a queue the role manages, with its last job's status (looked up by id).
SELECT s.name, s.cron, s.time_zone, s.queue_name, s.last_run::text, s.next_run::text,
       s.last_job_id, s.last_job_status::text, s.paused
FROM jq_schedules s
ORDER BY s.name
