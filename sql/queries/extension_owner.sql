-- The role whose rights the jq_* functions run with (the extension's owner); whether the installed
-- SQL definitions are older than this library (0.1.0 and 0.2.0: their tables are not the ones it
-- reads, so until ALTER EXTENSION UPDATE the job functions refuse, see src/rights.rs); and
-- jq_grants' oid, whose invalidations tell a session to forget its cached rights; and the version
-- of the installed SQL definitions, whose tables every later library reads differently until the
-- update.
SELECT e.extowner,
       e.extversion OPERATOR(pg_catalog.=) ANY (ARRAY['0.1.0', '0.2.0']),
       (SELECT c.oid FROM pg_catalog.pg_class c
        WHERE c.relname OPERATOR(pg_catalog.=) 'jq_grants'
          AND c.relnamespace OPERATOR(pg_catalog.=) e.extnamespace),
       e.extversion
FROM pg_catalog.pg_extension e
WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'
