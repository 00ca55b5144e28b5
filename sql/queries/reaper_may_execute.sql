-- $1 the name of a maintenance function taking (integer): jq_reap or jq_prune
-- Whether the reaper's role may run it, as it would need to from SQL: USAGE on the extension's
-- schema, then EXECUTE on the function (asked only with USAGE, since naming a function of a schema
-- without it is an error, which would fail the pass every time rather than be logged once). No
-- row: the extension is not installed here.
SELECT CASE WHEN pg_catalog.has_schema_privilege(n.oid, 'USAGE'::pg_catalog.text)
            THEN pg_catalog.has_function_privilege(
                     pg_catalog.to_regprocedure(pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'
                                                OPERATOR(pg_catalog.||) $1 OPERATOR(pg_catalog.||) '(integer)'),
                     'EXECUTE'::pg_catalog.text)
            ELSE false END
FROM pg_catalog.pg_extension e
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'
