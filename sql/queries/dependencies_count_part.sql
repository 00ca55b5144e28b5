-- $1 job, $2 one of its parts, $3 how many of the part's dependencies just succeeded
-- dependencies_count_parts.sql for a single part, the case of a single completion: one row to
-- lock, in no order to keep.
UPDATE jq_dependency_parts p
SET awaiting = p.awaiting - $3
WHERE p.job_id = $1
  AND p.part = $2
  AND p.awaiting > 0
RETURNING p.job_id, p.awaiting = 0 AS emptied
