-- $1 name
DELETE FROM jq_schedule_specs s WHERE s.name = $1 RETURNING s.name
