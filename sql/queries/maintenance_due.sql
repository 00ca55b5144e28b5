-- $1 now, $2 the reap pass's interval, $3 the prune pass's interval (NULL: retention is off)
-- A claim's maintenance of its database (src/api/maintenance.rs): takes the passes that are due,
-- marking each as run now. A pass another session is taking right now is skipped, never waited
-- for; the mark rolls back with the claim if the claim does.
UPDATE jq_maintenance_passes p
SET last_at = $1
FROM (SELECT d.pass
      FROM jq_maintenance_passes d
      WHERE (d.pass = 'reap' AND d.last_at <= $1 - $2)
         OR (d.pass = 'prune' AND $3 IS NOT NULL AND d.last_at <= $1 - $3)
      FOR UPDATE SKIP LOCKED) due
WHERE p.pass = due.pass
RETURNING p.pass
