-- The role whose rights the jq_* functions run with (the extension's owner); whether the installed
-- SQL definitions are older than the rights model (0.1.0 and 0.2.0 have no jq_grants: until ALTER
-- EXTENSION UPDATE, their functions keep running as their callers, as they did); and jq_grants'
-- oid, whose invalidations tell a session to forget its cached rights.
SELECT e.extowner,
       e.extversion OPERATOR(pg_catalog.=) ANY (ARRAY['0.1.0', '0.2.0']),
       (SELECT c.oid FROM pg_catalog.pg_class c
        WHERE c.relname OPERATOR(pg_catalog.=) 'jq_grants'
          AND c.relnamespace OPERATOR(pg_catalog.=) e.extnamespace)
FROM pg_catalog.pg_extension e
WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'
