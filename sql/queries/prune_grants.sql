-- Forgets the rights of roles that no longer exist (DROP ROLE, after DROP OWNED took back the
-- EXECUTE rights jq_grant gave): their rows give nothing, but a role made later might be given
-- the same oid, and with it their rights. Runs with every prune (src/api/retention.rs).
DELETE FROM jq_grants g
WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.oid OPERATOR(pg_catalog.=) g.role::pg_catalog.oid)
RETURNING 1
