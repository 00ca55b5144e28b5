-- Forgets the rights of roles that no longer exist (DROP ROLE, after DROP OWNED took back the
-- EXECUTE rights jq_grant gave), and that the extension gave them USAGE on its schema: their rows
-- give nothing, but a role made later might be given the same oid, and with it their rights (or a
-- revoke of a USAGE the DBA gave it). Runs with every prune (src/api/retention.rs).
WITH usage AS (
    DELETE FROM jq_schema_usage u
    WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) u.role)
)
DELETE FROM jq_grants g
WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) g.role::pg_catalog.oid)
RETURNING 1
