-- $1 job ids (bigint[])
-- Which of these jobs are in the history (succeeded), read in a fresh snapshot after
-- dependencies_states.sql found them gone from jq_live_jobs.
SELECT h.id FROM jq_job_history h WHERE h.id = ANY ($1)
