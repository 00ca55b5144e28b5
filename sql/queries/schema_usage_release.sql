-- What DROP EXTENSION is to take back of the USAGE on the extension's schema: the roles the
-- extension gave it (jq_grant to each role with a right, the install to pg_monitor), as
-- jq_schema_usage records them, and no other; each with the extension's oid and its schema's.
-- Read at the start of DROP EXTENSION, while the table stands; schema_usage_revoke.sql makes the
-- statements as the extension is dropped (src/api/rights.rs, `jq_extension_drop_starting`).
SELECT e.oid, e.extnamespace, u.role
FROM jq_schema_usage u
CROSS JOIN pg_catalog.pg_extension e
WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'::pg_catalog.name
