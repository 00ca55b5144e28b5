-- pg_jobqueue 0.1.0 -> 0.2.0
-- Adds jq_complete_batch (jq_complete for many jobs in one statement), the waiting claim (jq_claim's
-- `wait` argument), NOTIFY wake-ups on enqueue with their per-queue switch (jq_queues.notify), and
-- the operating figures: jq_queue_health with its thresholds in jq_queues, the counters
-- (jq_queue_counters, jq_failure_counts, jq_stats_reset), jq_metrics, and pg_monitor's rights.
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

-- The new columns go last, in the order a fresh install has them, with its defaults.
ALTER TABLE jq_queues ADD COLUMN notify boolean NOT NULL DEFAULT true;
ALTER TABLE jq_queues ADD COLUMN warn_claimable_age interval DEFAULT '5 minutes'
    CONSTRAINT jq_queues_warn_claimable_age_positive CHECK (warn_claimable_age > interval '0');
ALTER TABLE jq_queues ADD COLUMN warn_expiring_leases int DEFAULT 10
    CONSTRAINT jq_queues_warn_expiring_leases_positive CHECK (warn_expiring_leases >= 1);
ALTER TABLE jq_queues ADD COLUMN warn_dead_age interval DEFAULT '1 hour'
    CONSTRAINT jq_queues_warn_dead_age_not_negative CHECK (warn_dead_age >= interval '0');

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

-- What operators alert on, per queue: the oldest claimable job's age, running jobs whose lease ends
-- within 10 s, the oldest dead job's age (dead and neither re-driven nor purged), each with its
-- threshold from jq_queues (the defaults written there for a queue without a row) and a flag.
CREATE VIEW jq_queue_health AS
SELECT s.queue_name,
       s.oldest_claimable_age,
       s.expiring_10s AS expiring_leases,
       s.oldest_dead_age,
       t.warn_claimable_age,
       t.warn_expiring_leases,
       t.warn_dead_age,
       coalesce(s.oldest_claimable_age > t.warn_claimable_age, false) AS claimable_age_warning,
       coalesce(s.expiring_10s >= t.warn_expiring_leases, false)     AS expiring_leases_warning,
       coalesce(s.oldest_dead_age > t.warn_dead_age, false)           AS dead_age_warning
FROM jq_queue_stats s
LEFT JOIN jq_queues q ON q.queue_name = s.queue_name
CROSS JOIN LATERAL (
    SELECT CASE WHEN q.queue_name IS NULL THEN interval '5 minutes' ELSE q.warn_claimable_age END
               AS warn_claimable_age,
           CASE WHEN q.queue_name IS NULL THEN 10 ELSE q.warn_expiring_leases END
               AS warn_expiring_leases,
           CASE WHEN q.queue_name IS NULL THEN interval '1 hour' ELSE q.warn_dead_age END
               AS warn_dead_age
) t;

CREATE FUNCTION "jq_queue_counters"() RETURNS TABLE (
	"queue_name" TEXT,
	"claims" bigint,
	"completions" bigint,
	"failures" bigint,
	"retries" bigint,
	"deaths" bigint,
	"lease_expirations" bigint,
	"stale_completions" bigint,
	"stale_heartbeats" bigint,
	"cancellations" bigint,
	"wait_p50_seconds" double precision,
	"wait_p95_seconds" double precision,
	"wait_p99_seconds" double precision,
	"run_p50_seconds" double precision,
	"run_p95_seconds" double precision,
	"run_p99_seconds" double precision,
	"counted_since" timestamp with time zone
)
STRICT VOLATILE PARALLEL SAFE
SET search_path TO @extschema@, pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'jq_queue_counters_wrapper';

CREATE FUNCTION "jq_failure_counts"() RETURNS TABLE (
	"queue_name" TEXT,
	"error_code" TEXT,
	"failures" bigint
)
STRICT VOLATILE PARALLEL SAFE
SET search_path TO @extschema@, pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'jq_failure_counts_wrapper';

CREATE FUNCTION "jq_stats_reset"() RETURNS void
STRICT VOLATILE PARALLEL UNSAFE
SET search_path TO @extschema@, pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'jq_stats_reset_wrapper';

CREATE FUNCTION "jq_metrics"() RETURNS TEXT
STRICT VOLATILE PARALLEL RESTRICTED
SET search_path TO @extschema@, pg_catalog, pg_temp
LANGUAGE c
AS 'MODULE_PATHNAME', 'jq_metrics_wrapper';

-- Monitoring: members of the built-in pg_monitor role may read the views and call jq_metrics()
-- (which reads only the views and shared memory). They gain nothing else: no function that changes
-- jobs works without the table rights they lack. Resetting the counters is for the owner and those
-- it grants it to.
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT SELECT ON jq_queue_stats, jq_queue_health TO pg_monitor;
REVOKE EXECUTE ON FUNCTION jq_stats_reset() FROM PUBLIC;
