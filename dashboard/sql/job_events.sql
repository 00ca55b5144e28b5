-- $1 job id. The job's events in order, through the events' index on (job_id, id).
SELECT e.event, e.status::text, e.at::text, e.attempt, e.worker, e.lease_token, e.error_code, e.error_message
FROM jq_managed_job_events e
WHERE e.job_id OPERATOR(pg_catalog.=) $1
ORDER BY e.id
