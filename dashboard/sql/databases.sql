-- The databases /metrics reads with --metrics-all-databases, run on the connection string's own
-- database: every one that takes connections and that the role may connect to, but templates (a
-- session in one makes CREATE DATABASE from it fail). Whether each has the extension is asked there.
SELECT datname::text
FROM pg_catalog.pg_database
WHERE datallowconn AND NOT datistemplate AND pg_catalog.has_database_privilege(oid, 'CONNECT')
ORDER BY datname
