-- Failures by queue and error code since the counters' last reset (no rows without preload).
SELECT f.queue_name, f.error_code, f.failures
FROM jq_failure_counts() f
ORDER BY f.error_code, f.queue_name
