-- Utility statements that fail, each showing one field of its error (SQLSTATE, message, DETAIL,
-- HINT, CONTEXT, position). This file runs twice (scripts/test.sh regress): on a server without
-- the library and on one that preloads it, with the extension created here and its worker serving
-- this database; both runs must match this one expected output, so the library changes no field.
-- (tests/harness/tests/citizen.rs compares the fields psql does not print: schema, table and
-- constraint names, and the server's file, line and routine.)
\set SHOW_CONTEXT always
CREATE EXTENSION pg_jobqueue;
CREATE TABLE t (a int PRIMARY KEY, b int);
INSERT INTO t VALUES (1, 1), (2, 1);
CREATE VIEW v AS SELECT * FROM t;
-- Time for the worker, when there is one, to start serving this database.
SELECT pg_sleep(1.5);
-- SQLSTATE and message.
CREATE TABLE t (a int);
\echo :LAST_ERROR_SQLSTATE
-- DETAIL.
CREATE UNIQUE INDEX t_b ON t (b);
\echo :LAST_ERROR_SQLSTATE
-- DETAIL and HINT.
DROP TABLE t;
\echo :LAST_ERROR_SQLSTATE
-- HINT.
ALTER TABLE t ALTER COLUMN b TYPE date;
\echo :LAST_ERROR_SQLSTATE
-- Position.
CREATE TABLE u (a no_such_type);
\echo :LAST_ERROR_SQLSTATE
EXPLAIN SELECT no_such_column FROM t;
\echo :LAST_ERROR_SQLSTATE
CALL no_such_procedure();
\echo :LAST_ERROR_SQLSTATE
-- CONTEXT, from PL/pgSQL, with the user's own DETAIL and HINT.
DO $$ BEGIN RAISE EXCEPTION 'mine' USING DETAIL = 'its detail', HINT = 'its hint'; END $$;
\echo :LAST_ERROR_SQLSTATE
-- CONTEXT, from COPY.
COPY t FROM STDIN;
3	not a number
\.
-- Statements that need a database to themselves, one of them this database, which the worker
-- serves when the library is preloaded.
CREATE DATABASE utility_copy TEMPLATE regression;
DROP DATABASE utility_copy;
DROP DATABASE no_such_database;
\echo :LAST_ERROR_SQLSTATE
VACUUM no_such_table;
\echo :LAST_ERROR_SQLSTATE
DROP VIEW v;
DROP TABLE t;
DROP EXTENSION pg_jobqueue;
