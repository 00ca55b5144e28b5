CREATE EXTENSION pg_jobqueue;
