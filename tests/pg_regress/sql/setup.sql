-- Installs the extension once for the files that follow (pg_regress runs them in the order of the
-- schedule, in one database); each of them starts from empty tables of its own.
CREATE EXTENSION pg_jobqueue;

-- Security, "The functions are the only door": EXECUTE on every function of the extension is
-- revoked from PUBLIC, and PUBLIC has no right on its tables, views and sequences.
SELECT count(*) > 0 AS has_functions,
       count(*) FILTER (WHERE has_function_privilege('public', p.oid, 'EXECUTE')) AS public_may_execute
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_jobqueue';
-- (no rows: none)
SELECT c.relname, c.relkind
FROM pg_class c
JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_jobqueue'
WHERE has_table_privilege('public', c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER')
   OR (c.relkind = 'S' AND has_sequence_privilege('public', c.oid, 'USAGE, SELECT, UPDATE'));
