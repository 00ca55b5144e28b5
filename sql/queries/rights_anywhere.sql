-- $1 role (oid), $2 privileges (text[])
-- Whether a row of jq_grants gives the role (or a role whose privileges it inherits) one of the
-- privileges on some queue: a caller with none of them is refused with 42501 whatever job it
-- names, and one with some is answered for a job of another queue as for a job that does not
-- exist (src/rights.rs, `usable_jobs`).
SELECT EXISTS (
    SELECT 1
    FROM jq_grants g
    WHERE g.privilege OPERATOR(pg_catalog.=) ANY ($2)
      AND pg_catalog.pg_has_role($1, g.role::pg_catalog.oid, 'USAGE'::pg_catalog.text)
)
