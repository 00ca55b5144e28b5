-- $1 job_id, $2 awaiting
-- A re-driven job with dependencies waits again for those that have not succeeded (guide,
-- "Workflows"): their number, counted by src/api/dependencies.rs as an enqueue counts it.
UPDATE jq_live_jobs j
SET awaiting = $2
WHERE j.id = $1
  AND j.status OPERATOR(pg_catalog.=) 'pending'
RETURNING j.id
