-- pg_jobqueue 0.1.0 -> 0.2.0
-- Adds jq_complete_batch (jq_complete for many jobs in one statement), the waiting claim (jq_claim's
-- `wait` argument) and NOTIFY wake-ups on enqueue with their per-queue switch (jq_queues.notify).
-- The tables' data and every other 0.1.0 function stay as they are.
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

-- On by default, as a fresh install has it; the new column goes last, where a fresh install has it.
ALTER TABLE jq_queues ADD COLUMN notify boolean NOT NULL DEFAULT true;

-- A new trailing argument with a default is a new signature: replace the function, so that no
-- ambiguous four-argument overload stays behind. The library keeps the old symbol
-- (jq_claim_wrapper) for sessions that still run the 0.1.0 definition.
DROP FUNCTION jq_claim(text, text, interval, int);
CREATE FUNCTION "jq_claim"(
	"queue_name" TEXT,
	"worker" TEXT,
	"lease" interval DEFAULT NULL,
	"batch_size" INT DEFAULT 1,
	"wait" interval DEFAULT NULL
) RETURNS TABLE (
	"id" bigint,
	"queue_name" TEXT,
	"payload" jsonb,
	"priority" INT,
	"attempt_count" INT,
	"max_attempts" INT,
	"lease_token" bigint,
	"lease_expires_at" timestamp with time zone
)
VOLATILE PARALLEL UNSAFE
SET search_path TO @extschema@, pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'jq_claim_wait_wrapper';
