-- The statements that take back the USAGE on the schema $1 from the roles $2 (oid[]) as pg_jobqueue
-- is dropped, the schema outliving it (one the DBA made, or public): for those of the roles that
-- still exist, as long as the schema does (src/api/rights.rs, `object_access`).
SELECT pg_catalog.format('REVOKE USAGE ON SCHEMA %I FROM %I', n.nspname, r.rolname)
FROM pg_catalog.pg_namespace n
JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) ANY ($2)
WHERE n.oid OPERATOR(pg_catalog.=) $1
