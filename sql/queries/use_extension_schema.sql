-- The background worker's first statement in each pass. A worker starts with the default
-- search_path: pin pg_catalog first, then the extension's schema, for this transaction
-- (set_config(..., true) is transaction-local), as every jq_* function pins its own. No row: the
-- extension is not installed in this database, and the pass is skipped.
SELECT pg_catalog.set_config('search_path',
                             'pg_catalog, ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(n.nspname)
                                 OPERATOR(pg_catalog.||) ', pg_temp', true)
FROM pg_catalog.pg_extension e
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'
