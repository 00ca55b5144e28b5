-- $1 job ids (bigint[]), $2 what they depend on (bigint[]: the union of their depends_on)
-- The rows of jobs that leave jq_live_jobs (completed, pruned or purged): found by the key
-- (depends_on, job_id), one range per dependency.
DELETE FROM jq_job_dependencies d
WHERE d.depends_on = ANY ($2) AND d.job_id = ANY ($1)
