-- The background worker's first statement in each pass. A worker starts with the default
-- search_path: put the extension's schema first for this transaction (set_config(..., true) is
-- transaction-local). No row: the extension is not installed in this database, and the pass is
-- skipped.
SELECT pg_catalog.set_config('search_path',
                             pg_catalog.quote_ident(n.nspname) || ', pg_catalog, pg_temp', true)
FROM pg_catalog.pg_extension e
JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'pg_jobqueue'
