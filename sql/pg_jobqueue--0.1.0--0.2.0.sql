-- pg_jobqueue 0.1.0 -> 0.2.0
-- Adds jq_complete_batch: jq_complete for many jobs in one statement. Nothing else changes: the
-- tables, their data and every 0.1.0 function stay as they are.
\echo Use "ALTER EXTENSION pg_jobqueue UPDATE TO '0.2.0'" to load this file. \quit

CREATE FUNCTION "jq_complete_batch"(
	"job_ids" bigint[],
	"worker" TEXT,
	"lease_tokens" bigint[]
) RETURNS TABLE (
	"id" bigint
)
VOLATILE PARALLEL UNSAFE
SET search_path TO @extschema@, pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'jq_complete_batch_wrapper';
