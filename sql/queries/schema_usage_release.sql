-- The statements that take back the USAGE on the extension's schema that the extension gave
-- (jq_grant to each role with a right, the install to pg_monitor), as jq_schema_usage records it,
-- and no other: run as the extension is dropped, since the schema (one the DBA made, or public)
-- outlives it (src/api/rights.rs, `jq_extension_dropped`).
SELECT pg_catalog.format('REVOKE USAGE ON SCHEMA %I FROM %I', n.nspname, r.rolname)
FROM jq_schema_usage u
JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) u.role
CROSS JOIN pg_catalog.pg_extension e
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'::pg_catalog.name
