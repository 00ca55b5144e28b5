-- $1 job_id (bigint[]): the queues of these jobs, one row per job found. Run only when a guarded
-- call was refused, to count the refusal against the job's queue.
SELECT j.queue_name FROM jq_jobs j WHERE j.id = ANY ($1)
