-- When a claim last ran each pass in this database (src/api/maintenance.rs); the background
-- worker's passes are in shared memory.
SELECT p.pass, p.last_at FROM jq_maintenance_passes p
