-- pg_jobqueue 0.2.0 -> 0.3.0: safe to deploy (guide, "Security").
-- Every function pins pg_catalog first in its search_path; the functions run with the owner's
-- rights after checking the caller's per-queue right (jq_grants, jq_grant, jq_revoke); nothing is
-- executable by PUBLIC; the figures views show each role only the queues it may see; queue settings
-- are bounded (jq_setting_interval_ok) and changed through jq_configure; backoff is computed so
-- that it cannot overflow (jq_backoff_delay). Roles that used the tables directly under 0.2.0 keep
-- what they could do, as rights on every queue, and lose the table rights. Storage is split into a
-- hot table and a partitioned history (guide, "Storage"). Jobs and leases stay.
\echo Use "ALTER EXTENSION pg_jobqueue UPDATE TO '0.3.0'" to load this file. \quit

-- Every lock the update needs, taken first: it waits for running calls and readers of the figures
-- views to finish, rather than meeting them halfway (a reader of jq_queue_stats already waiting when
-- the view is replaced made the update the deadlock's victim, after all its work).
LOCK TABLE jq_queues, jq_jobs, jq_job_events, jq_queue_stats, jq_queue_health IN ACCESS EXCLUSIVE MODE;

-- Rights per queue (guide, "Security"): a role holds `privilege` on every queue named `queue`, or,
-- when `queue` ends in '*', on every queue whose name starts with what comes before it ('*' alone:
-- every queue). Written by jq_grant and jq_revoke; a statement trigger (sql/schema/rights.sql) tells every
-- session to forget its cached answers when it changes.
CREATE TABLE jq_grants (
    role      regrole NOT NULL,
    queue     text NOT NULL
              CONSTRAINT jq_grants_queue_valid
              CHECK (queue ~ '^([A-Za-z0-9_.:-]{1,60}|[A-Za-z0-9_.:-]{0,59}[*])$'),
    privilege text NOT NULL
              CONSTRAINT jq_grants_privilege_known
              CHECK (privilege IN ('enqueue', 'consume', 'manage', 'monitor')),
    PRIMARY KEY (role, queue, privilege)
);

SELECT pg_catalog.pg_extension_config_dump('jq_grants', '');

-- Fencing tokens that outlive a crash: see sql/schema/tables.sql, which creates the same table.
CREATE TABLE jq_token_epochs (
    epoch       bigint NOT NULL CONSTRAINT jq_token_epochs_bounded CHECK (epoch BETWEEN 0 AND 2147483647),
    replayed_to bigint NOT NULL,
    timeline    bigint NOT NULL
);
SELECT pg_catalog.pg_extension_config_dump('jq_token_epochs', '');

-- When a claim last ran each maintenance pass: see sql/schema/tables.sql, which creates the same table.
CREATE TABLE jq_maintenance_passes (
    pass    text CONSTRAINT jq_maintenance_passes_pkey PRIMARY KEY,
    last_at timestamptz NOT NULL
);
INSERT INTO jq_maintenance_passes (pass, last_at) VALUES ('reap', '-infinity'), ('prune', '-infinity');

-- Enqueue takes a concurrency key (guide, "Flow control") and a deadline (guide, "Snooze and
-- deadlines"), and a completion a result (guide, "Results and waiting"): the functions of 0.2.0
-- give way to ones with the new trailing arguments, so that no call has two candidates.
DROP FUNCTION jq_enqueue(text, jsonb, int, timestamptz, int, text, text);
DROP FUNCTION jq_enqueue_batch(text, jsonb[], int, timestamptz, int);
DROP FUNCTION jq_complete(bigint, text, bigint);
DROP FUNCTION jq_complete_batch(bigint[], text, bigint[]);
CREATE  FUNCTION "jq_enqueue"(
	"queue_name" TEXT, /* Option < & str > */
	"payload" jsonb, /* Option < Payload > */
	"priority" INT DEFAULT 0, /* Option < i32 > */
	"run_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"max_attempts" INT DEFAULT NULL, /* Option < i32 > */
	"dedup_key" TEXT DEFAULT NULL, /* Option < & str > */
	"ordering_key" TEXT DEFAULT NULL, /* Option < & str > */
	"concurrency_key" TEXT DEFAULT NULL, /* Option < & str > */
	"expires_at" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
) RETURNS bigint /* spi :: Result < i64 > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_enqueue_job_wrapper';

CREATE  FUNCTION "jq_enqueue_batch"(
	"queue_name" TEXT, /* Option < & str > */
	"payloads" jsonb[], /* :: std :: option :: Option < Vec < Option < Payload > > > */
	"priority" INT DEFAULT 0, /* Option < i32 > */
	"run_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"max_attempts" INT DEFAULT NULL, /* Option < i32 > */
	"concurrency_key" TEXT DEFAULT NULL, /* Option < & str > */
	"expires_at" timestamp with time zone DEFAULT NULL /* Option < TimestampWithTimeZone > */
) RETURNS SETOF bigint /* i64 */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_enqueue_jobs_wrapper';

CREATE  FUNCTION "jq_complete"(
	"job_id" bigint, /* Option < i64 > */
	"worker" TEXT, /* Option < & str > */
	"lease_token" bigint, /* Option < i64 > */
	"result" jsonb DEFAULT NULL /* Option < Payload > */
) RETURNS bool /* spi :: Result < bool > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_complete_job_wrapper';

CREATE  FUNCTION "jq_complete_batch"(
	"job_ids" bigint[], /* :: std :: option :: Option < Vec < Option < i64 > > > */
	"worker" TEXT, /* Option < & str > */
	"lease_tokens" bigint[], /* :: std :: option :: Option < Vec < Option < i64 > > > */
	"results" jsonb[] DEFAULT NULL /* :: std :: option :: Option < Vec < Option < Payload > > > */
) RETURNS TABLE (
	"id" bigint  /* i64 */
)
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_complete_jobs_wrapper';

-- The functions that are new in 0.3.0.
CREATE  FUNCTION "jq_maintenance_status"() RETURNS TABLE (
	"served_by" TEXT,  /* alloc::string::String */
	"last_reap_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_prune_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_tick_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"stale" bool,  /* bool */
	"last_partition_at" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_maintenance_status_wrapper';

CREATE  FUNCTION "jq_result"(
	"job_id" bigint /* Option < i64 > */
) RETURNS TABLE (
	"status" jq_status,  /* Status */
	"result" jsonb,  /* Option < Payload > */
	"last_error_code" TEXT,  /* Option < String > */
	"last_error_message" TEXT,  /* Option < String > */
	"finished_at" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_result_wrapper';

CREATE  FUNCTION "jq_await"(
	"job_id" bigint, /* Option < i64 > */
	"wait" interval /* Option < Interval > */
) RETURNS TABLE (
	"status" jq_status,  /* Status */
	"result" jsonb,  /* Option < Payload > */
	"last_error_code" TEXT,  /* Option < String > */
	"last_error_message" TEXT,  /* Option < String > */
	"finished_at" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_await_wrapper';

CREATE  FUNCTION "jq_progress"(
	"job_id" bigint, /* Option < i64 > */
	"worker" TEXT, /* Option < & str > */
	"lease_token" bigint, /* Option < i64 > */
	"progress" jsonb /* Option < Payload > */
) RETURNS bool /* spi :: Result < bool > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_progress_wrapper';

CREATE  FUNCTION "jq_progress_of"(
	"job_id" bigint, /* Option < i64 > */
	"worker" TEXT, /* Option < & str > */
	"lease_token" bigint /* Option < i64 > */
) RETURNS jsonb /* spi :: Result < Option < Payload > > */
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_progress_of_wrapper';

CREATE  FUNCTION "jq_snooze"(
	"job_id" bigint, /* Option < i64 > */
	"worker" TEXT, /* Option < & str > */
	"lease_token" bigint, /* Option < i64 > */
	"delay" interval /* Option < Interval > */
) RETURNS bool /* spi :: Result < bool > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_snooze_wrapper';

CREATE  FUNCTION "jq_schedule"(
	"name" TEXT, /* Option < & str > */
	"cron" TEXT, /* Option < & str > */
	"queue_name" TEXT, /* Option < & str > */
	"payload" jsonb, /* Option < Payload > */
	"time_zone" TEXT DEFAULT 'UTC', /* Option < & str > */
	"catch_up" TEXT DEFAULT 'once', /* Option < & str > */
	"catch_up_limit" INT DEFAULT 10, /* Option < i32 > */
	"priority" INT DEFAULT 0, /* Option < i32 > */
	"max_attempts" INT DEFAULT NULL, /* Option < i32 > */
	"dedup_key" TEXT DEFAULT NULL, /* Option < & str > */
	"ordering_key" TEXT DEFAULT NULL, /* Option < & str > */
	"concurrency_key" TEXT DEFAULT NULL, /* Option < & str > */
	"paused" bool DEFAULT false /* Option < bool > */
) RETURNS timestamp with time zone /* spi :: Result < TimestampWithTimeZone > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_schedule_wrapper';

CREATE  FUNCTION "jq_unschedule"(
	"name" TEXT /* Option < & str > */
) RETURNS bool /* spi :: Result < bool > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_unschedule_wrapper';

CREATE  FUNCTION "jq_pause_schedule"(
	"name" TEXT /* Option < & str > */
) RETURNS bool /* spi :: Result < bool > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_pause_schedule_wrapper';

CREATE  FUNCTION "jq_resume_schedule"(
	"name" TEXT /* Option < & str > */
) RETURNS bool /* spi :: Result < bool > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_resume_schedule_wrapper';

CREATE  FUNCTION "jq_cron_next"(
	"cron" TEXT, /* Option < & str > */
	"time_zone" TEXT DEFAULT 'UTC', /* Option < & str > */
	"after" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"count" INT DEFAULT 5 /* Option < i32 > */
) RETURNS SETOF timestamp with time zone /* TimestampWithTimeZone */
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_cron_next_wrapper';

CREATE  FUNCTION "jq_backoff_delay"(
	"base" interval, /* Interval */
	"cap" interval, /* Interval */
	"attempt" INT /* i32 */
) RETURNS interval /* Interval */
STRICT VOLATILE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_backoff_delay_wrapper';

CREATE  FUNCTION "jq_can_see"(
	"queue_name" TEXT /* & str */
) RETURNS bool /* bool */
STRICT STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_can_see_wrapper';

CREATE  FUNCTION "jq_has_right"(
	"queue_name" TEXT, /* Option < & str > */
	"privilege" TEXT /* Option < & str > */
) RETURNS bool /* bool */
STABLE PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_has_right_wrapper';

CREATE  FUNCTION "jq_configure"(
	"queue_name" TEXT, /* Option < & str > */
	"settings" jsonb /* Option < JsonB > */
) RETURNS jsonb /* spi :: Result < JsonB > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_configure_wrapper';

CREATE  FUNCTION "jq_configure_key"(
	"queue_name" TEXT, /* Option < & str > */
	"concurrency_key" TEXT, /* Option < & str > */
	"settings" jsonb /* Option < JsonB > */
) RETURNS jsonb /* spi :: Result < JsonB > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_configure_key_wrapper';

CREATE  FUNCTION "jq_setting_interval_ok"(
	"value" interval /* Interval */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_setting_interval_ok_wrapper';

-- The invariant of every job row, the CHECK constraint of jq_live_jobs below (src/api/lease.rs).
CREATE  FUNCTION "jq_live_job_consistent"(
	"status" jq_status, /* Status */
	"max_attempts" INT, /* i32 */
	"attempt_count" INT, /* i32 */
	"leased" bool, /* bool */
	"lease_ends" bool /* bool */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_live_job_consistent_wrapper';


CREATE FUNCTION "jq_table_changed"()
	RETURNS TRIGGER
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'jq_table_changed_wrapper';


-- Settings out of the new bounds would make the constraints below refuse the upgrade: each becomes
-- the plain length it compared as, in seconds between 1 and 100 years (36,000 days, as intervals
-- compare), and a warning says so.
DO $$
DECLARE
    setting text;
    changed bigint;
BEGIN
    FOREACH setting IN ARRAY ARRAY['default_lease', 'backoff_base', 'backoff_cap', 'max_runtime',
                                   'starvation_limit', 'retention', 'warn_claimable_age', 'warn_dead_age']
    LOOP
        EXECUTE pg_catalog.format(
            'UPDATE jq_queues SET %1$I = pg_catalog.make_interval(secs => least(greatest(
                 extract(epoch FROM %1$I), 1), 3110400000)::float8)
             WHERE NOT jq_setting_interval_ok(%1$I)', setting);
        GET DIAGNOSTICS changed = ROW_COUNT;
        IF changed OPERATOR(pg_catalog.>) 0 THEN
            RAISE WARNING 'pg_jobqueue: % queue(s) had a % out of bounds; it was set to its length in plain time', changed, setting;
        END IF;
    END LOOP;
END
$$;

-- Queue settings that cannot stop a queue. Every interval setting adds what it says: no part of it
-- (months, days, time) is negative, so `interval '1 mon -30 days 23:59:59'`, which compares as less
-- than a day yet adds up to two, is refused; and none exceeds 100 years, so that adding it to the
-- clock stays in range (a '300000 years' starvation_limit made every claim of its queue fail).
ALTER TABLE jq_queues
    ADD CONSTRAINT jq_queues_default_lease_bounded CHECK (jq_setting_interval_ok(default_lease)),
    ADD CONSTRAINT jq_queues_backoff_base_bounded CHECK (jq_setting_interval_ok(backoff_base)),
    ADD CONSTRAINT jq_queues_backoff_cap_bounded CHECK (jq_setting_interval_ok(backoff_cap)),
    ADD CONSTRAINT jq_queues_max_runtime_bounded CHECK (jq_setting_interval_ok(max_runtime)),
    ADD CONSTRAINT jq_queues_starvation_limit_bounded CHECK (jq_setting_interval_ok(starvation_limit)),
    ADD CONSTRAINT jq_queues_retention_bounded CHECK (jq_setting_interval_ok(retention)),
    ADD CONSTRAINT jq_queues_warn_claimable_age_bounded CHECK (jq_setting_interval_ok(warn_claimable_age)),
    ADD CONSTRAINT jq_queues_warn_dead_age_bounded CHECK (jq_setting_interval_ok(warn_dead_age));

-- Flow control (guide, "Flow control"): a limit on each concurrency key's running jobs, and
-- rate limits for the queue and for each key, with what they counted (see sql/schema/tables.sql).
ALTER TABLE jq_queues
    ADD COLUMN key_concurrency_limit int
        CONSTRAINT jq_queues_key_concurrency_limit_positive CHECK (key_concurrency_limit >= 1),
    ADD COLUMN rate_limit int CONSTRAINT jq_queues_rate_limit_positive CHECK (rate_limit >= 1),
    ADD COLUMN rate_period interval CONSTRAINT jq_queues_rate_period_positive CHECK (rate_period > interval '0'),
    ADD COLUMN key_rate_limit int CONSTRAINT jq_queues_key_rate_limit_positive CHECK (key_rate_limit >= 1),
    ADD COLUMN key_rate_period interval
        CONSTRAINT jq_queues_key_rate_period_positive CHECK (key_rate_period > interval '0'),
    ADD CONSTRAINT jq_queues_rate_paired CHECK ((rate_limit IS NULL) = (rate_period IS NULL)),
    ADD CONSTRAINT jq_queues_key_rate_paired CHECK ((key_rate_limit IS NULL) = (key_rate_period IS NULL)),
    ADD CONSTRAINT jq_queues_rate_period_bounded CHECK (jq_setting_interval_ok(rate_period)),
    ADD CONSTRAINT jq_queues_key_rate_period_bounded CHECK (jq_setting_interval_ok(key_rate_period));

-- Queues that keep no succeeded job (guide, "Queues that keep nothing").
ALTER TABLE jq_queues ADD COLUMN keep_succeeded boolean NOT NULL DEFAULT true;

-- One concurrency key's own settings in a queue (guide, "Flow control"), set by jq_configure_key:
-- a limit on its running jobs in place of the queue's key_concurrency_limit (NULL: the queue's),
-- and its weight in the key rotation, whose turn gives a key of weight w up to w jobs. A key
-- without a row has the queue's limit and weight 1.
CREATE TABLE jq_key_settings (
    queue_name        text NOT NULL
                      CONSTRAINT jq_key_settings_name_valid CHECK (queue_name ~ '^[A-Za-z0-9_.:-]{1,60}$'),
    concurrency_key   text NOT NULL
                      CONSTRAINT jq_key_settings_key_valid
                      CHECK (concurrency_key <> '' AND pg_catalog.length(concurrency_key) <= 256),
    concurrency_limit int
                      CONSTRAINT jq_key_settings_concurrency_limit_positive CHECK (concurrency_limit >= 1),
    weight            int NOT NULL DEFAULT 1
                      CONSTRAINT jq_key_settings_weight_bounded CHECK (weight BETWEEN 1 AND 1000),
    CONSTRAINT jq_key_settings_pkey PRIMARY KEY (queue_name, concurrency_key)
);

SELECT pg_catalog.pg_extension_config_dump('jq_key_settings', '');

CREATE TABLE jq_rate_counts (
    queue_id        int NOT NULL,
    concurrency_key text NOT NULL,   -- '': the queue's own rate; a concurrency key is never empty
    window_start    timestamptz NOT NULL,
    claims          int NOT NULL,
    CONSTRAINT jq_rate_counts_pkey PRIMARY KEY (queue_id, concurrency_key)
);
SELECT pg_catalog.pg_extension_config_dump('jq_rate_counts', '');

-- Recurring jobs (guide, "Schedules"): each schedule enqueues a job into its queue, with these
-- job options, at every tick of its cron expression in its time zone. Ticks are made by the
-- background worker and by jq_reap() (src/api/schedules.rs): a tick pass locks a due row, enqueues
-- its jobs and moves next_run on in one transaction, so however many tickers race, each tick
-- enqueues once. Written only through jq_schedule and its siblings, which check the expression,
-- the zone and the options as jq_enqueue checks them; the view jq_schedules shows the rows.
CREATE TABLE jq_schedule_specs (
    name            text CONSTRAINT jq_schedule_specs_pkey PRIMARY KEY
                    CONSTRAINT jq_schedule_specs_name_valid CHECK (name ~ '^[A-Za-z0-9_.:-]{1,100}$'),
    cron            text NOT NULL,
    time_zone       text NOT NULL,
    queue_name      text NOT NULL
                    CONSTRAINT jq_schedule_specs_queue_valid CHECK (queue_name ~ '^[A-Za-z0-9_.:-]{1,60}$'),
    payload         jsonb NOT NULL,
    priority        int NOT NULL,
    max_attempts    int CONSTRAINT jq_schedule_specs_max_attempts_positive CHECK (max_attempts >= 1),
    dedup_key       text,
    ordering_key    text,
    concurrency_key text,
    -- What a tick pass does with ticks it finds past (the server was down, or no ticker ran):
    -- 'skip' runs only a tick less than a minute late, 'once' one job for the latest, 'each' one
    -- job for each of the latest catch_up_limit.
    catch_up        text NOT NULL
                    CONSTRAINT jq_schedule_specs_catch_up_known CHECK (catch_up IN ('skip', 'once', 'each')),
    catch_up_limit  int NOT NULL
                    CONSTRAINT jq_schedule_specs_catch_up_limit_bounded CHECK (catch_up_limit BETWEEN 1 AND 1000),
    paused          boolean NOT NULL,
    -- The next tick, an instant: the cron's next local time in time_zone after the last tick made
    -- (or after the time of jq_schedule, or of jq_resume_schedule).
    next_run        timestamptz NOT NULL,
    last_run        timestamptz,    -- the tick of the last job enqueued
    last_job_id     bigint,
    created_at      timestamptz NOT NULL
);

-- The tick pass: the due schedules, soonest first.
CREATE INDEX jq_schedule_specs_due ON jq_schedule_specs (next_run) WHERE NOT paused;

SELECT pg_catalog.pg_extension_config_dump('jq_schedule_specs', '');

-- `notify` may now be NULL, the new default: NOTIFY while someone listens, which only a preloaded
-- library can tell, so without preload never (guide, "Wake-ups"). Under 0.2.0, on meant just that
-- where the library is preloaded, and always where it is not: so a preloaded server's queues that
-- were on become NULL, and elsewhere they stay on (true: always) and go on notifying as before.
ALTER TABLE jq_queues ALTER COLUMN notify DROP NOT NULL, ALTER COLUMN notify DROP DEFAULT;
UPDATE jq_queues SET notify = NULL
WHERE notify
  AND 'pg_jobqueue' = ANY (pg_catalog.string_to_array(
          pg_catalog.replace(pg_catalog.current_setting('shared_preload_libraries'), ' ', ''), ','));

-- Retry delay after `attempt` failed attempts, with the queue's backoff_base and backoff_cap (the
-- defaults for a queue without a row): see jq_backoff_delay, which cannot overflow.
CREATE OR REPLACE FUNCTION jq_backoff(queue_name text, attempt int) RETURNS interval
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
    SELECT jq_backoff_delay(coalesce(q.backoff_base, interval '1 second'),
                            coalesce(q.backoff_cap, interval '1 hour'), attempt)
    FROM (VALUES (1)) AS one
    LEFT JOIN jq_queues q ON q.queue_name = jq_backoff.queue_name
$$;

-- Storage split (guide, "Storage"). The jobs of 0.2.0 move into the new tables: every pending,
-- running, dead and cancelled job to the hot table, with its id, lease, token and everything else,
-- and every succeeded one to the history's default partition (the day partitions are made after
-- installation, by jq_prune, so that they do not belong to the extension; retention deletes the
-- moved rows one by one when their time comes). Each queue with jobs gets its number. The old table
-- stays, renamed, until the rights below are read from it; events lose their foreign key, since a
-- job is now in one of two tables.
ALTER TABLE jq_job_events DROP CONSTRAINT jq_job_events_job_id_fkey;
ALTER TABLE jq_jobs RENAME TO jq_jobs_0_2_0;

-- A snooze is an event too (guide, "Snooze and deadlines").
ALTER TABLE jq_job_events DROP CONSTRAINT jq_job_events_event_known,
    ADD CONSTRAINT jq_job_events_event_known
        CHECK (event IN ('failed', 'lease_expired', 'retried', 'cancelled', 'snoozed'));

-- The events' default as a fresh install has it. The 0.1.0 and 0.2.0 scripts passed nextval an
-- untyped literal, which a nextval(text) planted in the schema before their install captured:
-- bound to pg_catalog's here, whatever was planted then.
ALTER TABLE jq_job_events ALTER COLUMN id SET DEFAULT pg_catalog.nextval('jq_job_events_id_seq'::pg_catalog.regclass);

-- Queues by number. Every key of the job tables starts with the queue, and an integer is narrower
-- than the name and compares without collation rules (guide, "Storage"). A name gets its number
-- from the first enqueue into it (src/api/enqueue.rs) and keeps it; rows are never deleted, so a
-- number never names another queue.
CREATE SEQUENCE jq_queue_ids_seq AS integer;

CREATE TABLE jq_queue_ids (
    queue_id   int DEFAULT pg_catalog.nextval('jq_queue_ids_seq'::pg_catalog.regclass) CONSTRAINT jq_queue_ids_pkey PRIMARY KEY,
    queue_name text NOT NULL CONSTRAINT jq_queue_ids_name_key UNIQUE
               CONSTRAINT jq_queue_ids_name_valid CHECK (queue_name ~ '^[A-Za-z0-9_.:-]{1,60}$'),
    -- Some job of the queue has had an ordering key: set by the first such enqueue, never cleared.
    -- Until then its claims run without the ordering-key check (src/api/settings.rs).
    ordering_keys boolean NOT NULL DEFAULT false
);

-- Storage is split (guide, "Storage"): jq_live_jobs holds the jobs that may still change (pending,
-- running, and the dead and cancelled ones a re-drive can bring back); a completion moves its job to
-- jq_job_history, append-only and partitioned by day. The view jq_jobs shows both as one table.
-- Claims, heartbeats and the reaper touch only the hot table, whose size is the live work, not
-- the history kept.
CREATE TABLE jq_live_jobs (
    id               bigint DEFAULT pg_catalog.nextval('jq_jobs_id_seq'::pg_catalog.regclass) CONSTRAINT jq_live_jobs_pkey PRIMARY KEY,
    queue_id         int NOT NULL,  -- jq_queue_ids; no foreign key, whose check would cost every insert
    payload          jsonb NOT NULL,
    status           jq_status NOT NULL DEFAULT 'pending',
    priority         int NOT NULL DEFAULT 0,
    available_at     timestamptz NOT NULL,
    attempt_count    int NOT NULL DEFAULT 0,
    max_attempts     int NOT NULL,
    lease_owner      text,
    lease_token      bigint NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    lease_length     interval,      -- lease length of the current claim: a heartbeat's default extension
    claimed_at       timestamptz,   -- when the current (or last) attempt was claimed
    run_deadline     timestamptz,   -- claimed_at + the queue's max_runtime at claim time; NULL: no limit
    last_error_code  text,
    last_error_message text,
    dedup_key        text,
    ordering_key     text,
    concurrency_key  text,          -- claimed key by key in turn (guide, "Flow control")
    created_at       timestamptz NOT NULL,
    finished_at      timestamptz,
    -- A pending job not claimed before this ends cancelled, EXPIRED (guide, "Snooze and
    -- deadlines"); NULL: never.
    expires_at       timestamptz,
    -- What the worker last reported with jq_progress; kept across retries, so that a retried
    -- attempt can resume (guide, "Progress and checkpoints").
    progress         jsonb,
    -- The invariant of every job row, whoever writes it: one call of a compiled function, as in
    -- the install (sql/schema/constraints.sql says why).
    CONSTRAINT jq_live_jobs_consistent CHECK (
        jq_live_job_consistent(status, max_attempts, attempt_count,
                               lease_owner IS NOT NULL, lease_expires_at IS NOT NULL))
);

-- Seven indexes, each for the statements named (guide, "Storage"):

-- The claim index: only pending rows without a concurrency key, keyed in the claim's own order after the queue. A claim walks
-- it from the claim front and stops after batch_size rows: it never sorts. It also answers the
-- fairness check (is a job of some priority older than the starvation limit?) with one probe per
-- priority present, each the oldest entry of its priority, and the waiting claim's "is anything due,
-- and when next?" the same way (claim.sql, parts/pending_levels.sql, claim_front.sql).
-- An index in arrival order would answer those with one probe, and cost every enqueue an insertion.
CREATE INDEX jq_live_jobs_claim ON jq_live_jobs (queue_id, priority DESC, available_at, id)
    WHERE status OPERATOR(pg_catalog.=) 'pending' AND concurrency_key IS NULL;

-- The key claim index: the pending rows with a concurrency key, which claims take key by key in
-- turn (guide, "Flow control"), so keyed by key first, then in the claim's own order within the
-- key. A pending job is in exactly one of the two claim indexes: a key costs its jobs nothing more.
-- The rotation finds the next key with pending jobs by one probe (claim_keys.sql), and a key's
-- first jobs by one range (claim_keyed.sql).
CREATE INDEX jq_live_jobs_key_claim ON jq_live_jobs (queue_id, concurrency_key, priority DESC, available_at, id)
    WHERE status OPERATOR(pg_catalog.=) 'pending' AND concurrency_key IS NOT NULL;

-- Running rows: the reaper's expired leases, the concurrency limit's running count, and by the
-- concurrency key a key's running count under its limit (reap_expired_ids.sql, claim_running.sql,
-- claim_keyed.sql). One index for both, so that a key's count has no index of the whole queue's
-- running jobs to be planned onto. Deliberately not keyed on lease_expires_at: a heartbeat
-- changes only that column, so it stays a HOT update (no index insertions, and the old version
-- is pruned on the page).
CREATE INDEX jq_live_jobs_running ON jq_live_jobs (queue_id, concurrency_key) WHERE status OPERATOR(pg_catalog.=) 'running';

-- Pending jobs with a deadline: the reaper's sweep of those it passed (expire.sql). Only jobs
-- enqueued with `expires_at` have an entry.
CREATE INDEX jq_live_jobs_expiring ON jq_live_jobs (expires_at)
    WHERE status OPERATOR(pg_catalog.=) 'pending' AND expires_at IS NOT NULL;

-- Dead and cancelled jobs: the stats view, re-drive and purge by queue, and the retention of
-- cancelled jobs (retry_dead.sql, purge_dead.sql, prune_cancelled.sql).
CREATE INDEX jq_live_jobs_unresolved ON jq_live_jobs (queue_id, status, finished_at)
    WHERE status OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'cancelled']::jq_status[]);

-- Dedup keys: unique among live jobs only, so a finished job frees its key. Enqueue relies on
-- ON CONFLICT against this index, which is race-free where a read-then-insert is not.
CREATE UNIQUE INDEX jq_live_jobs_dedup ON jq_live_jobs (queue_id, dedup_key)
    WHERE dedup_key IS NOT NULL AND status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[]);

-- Ordering keys: the claim asks "is an earlier job of this key still live, or another one running?".
CREATE INDEX jq_live_jobs_ordering ON jq_live_jobs (queue_id, ordering_key, id)
    WHERE ordering_key IS NOT NULL AND status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[]);

-- Every job is inserted once, updated at its claim and deleted (or updated) when it finishes, so
-- dead tuples pile up at the rate of the queue's throughput while the table stays small. Vacuum on
-- a fixed small count rather than a fraction of the table (a fraction of a small table is a few
-- rows, of a large dead backlog many hours of work), and leave 30% of each page free so heartbeat
-- updates find room for HOT.
ALTER TABLE jq_live_jobs SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

-- Succeeded jobs, as they were when they completed; never updated. Partitioned by the day (UTC) of
-- finished_at, so that retention truncates and drops a whole day (guide, "Storage") instead of
-- deleting rows one by one and leaving vacuum the work. The partitions of the coming days are made by
-- jq_prune and the background worker (src/api/retention.rs); a completion for which no day partition
-- exists (maintenance never ran) lands in jq_job_history_default, pruned row by row.
CREATE TABLE jq_job_history (
    id                 bigint NOT NULL,
    queue_id           int NOT NULL,
    payload            jsonb NOT NULL,
    priority           int NOT NULL,
    available_at       timestamptz NOT NULL,
    attempt_count      int NOT NULL,
    max_attempts       int NOT NULL,
    lease_token        bigint NOT NULL,
    lease_length       interval,
    claimed_at         timestamptz,
    run_deadline       timestamptz,
    last_error_code    text,
    last_error_message text,
    dedup_key          text,
    ordering_key       text,
    created_at         timestamptz NOT NULL,
    finished_at        timestamptz NOT NULL,
    concurrency_key    text,
    expires_at         timestamptz,
    progress           jsonb,
    -- What the worker completed the job with (guide, "Results and waiting").
    result             jsonb
) PARTITION BY RANGE (finished_at);

CREATE TABLE jq_job_history_default PARTITION OF jq_job_history DEFAULT;

-- Each partition has its own two indexes, made with it (for the days: history_days_missing.sql),
-- and none is declared on jq_job_history itself: an index there would belong to the extension and
-- be made again on every partition that pg_restore attaches, before pg_dump's own copy of it, which
-- would then fail. The planner uses each partition's indexes all the same.
--   by id: jq_jobs readers, and a refused completion counted against its queue;
--   by queue and age: which queues a day holds (whether every one of them is past its retention),
--   and the row-by-row pruning of a queue whose retention is shorter than its day's.
CREATE INDEX jq_job_history_default_id ON jq_job_history_default (id);
CREATE INDEX jq_job_history_default_queue ON jq_job_history_default (queue_id, finished_at);

-- One row per job, with the columns jq_jobs always had, whichever table holds the job. A job moves between them
-- only inside one statement, so every snapshot sees it exactly once.
CREATE VIEW jq_jobs AS
SELECT j.id, q.queue_name, j.payload, j.status, j.priority, j.available_at, j.attempt_count,
       j.max_attempts, j.lease_owner, j.lease_token, j.lease_expires_at, j.lease_length, j.claimed_at,
       j.run_deadline, j.last_error_code, j.last_error_message, j.dedup_key, j.ordering_key,
       j.created_at, j.finished_at, j.concurrency_key, j.expires_at, j.progress, NULL::jsonb AS result
FROM jq_live_jobs j
JOIN jq_queue_ids q ON q.queue_id = j.queue_id
UNION ALL
SELECT h.id, q.queue_name, h.payload, 'succeeded'::jq_status, h.priority, h.available_at,
       h.attempt_count, h.max_attempts, NULL::text, h.lease_token, NULL::timestamptz, h.lease_length,
       h.claimed_at, h.run_deadline, h.last_error_code, h.last_error_message, h.dedup_key,
       h.ordering_key, h.created_at, h.finished_at, h.concurrency_key, h.expires_at, h.progress, h.result
FROM jq_job_history h
JOIN jq_queue_ids q ON q.queue_id = h.queue_id;

INSERT INTO jq_queue_ids (queue_name, ordering_keys)
SELECT o.queue_name, pg_catalog.bool_or(o.ordering_key IS NOT NULL)
FROM jq_jobs_0_2_0 o
GROUP BY o.queue_name
ORDER BY o.queue_name;

INSERT INTO jq_live_jobs (id, queue_id, payload, status, priority, available_at, attempt_count,
                          max_attempts, lease_owner, lease_token, lease_expires_at, lease_length,
                          claimed_at, run_deadline, last_error_code, last_error_message, dedup_key,
                          ordering_key, created_at, finished_at)
SELECT o.id, n.queue_id, o.payload, o.status, o.priority, o.available_at, o.attempt_count,
       o.max_attempts, o.lease_owner, o.lease_token, o.lease_expires_at, o.lease_length,
       o.claimed_at, o.run_deadline, o.last_error_code, o.last_error_message, o.dedup_key,
       o.ordering_key, o.created_at, o.finished_at
FROM jq_jobs_0_2_0 o
JOIN jq_queue_ids n ON n.queue_name OPERATOR(pg_catalog.=) o.queue_name
WHERE o.status OPERATOR(pg_catalog.<>) 'succeeded';

INSERT INTO jq_job_history
SELECT o.id, n.queue_id, o.payload, o.priority, o.available_at, o.attempt_count, o.max_attempts,
       o.lease_token, o.lease_length, o.claimed_at, o.run_deadline, o.last_error_code,
       o.last_error_message, o.dedup_key, o.ordering_key, o.created_at, o.finished_at, NULL, NULL, NULL,
       NULL
FROM jq_jobs_0_2_0 o
JOIN jq_queue_ids n ON n.queue_name OPERATOR(pg_catalog.=) o.queue_name
WHERE o.status OPERATOR(pg_catalog.=) 'succeeded';

SELECT pg_catalog.pg_extension_config_dump('jq_queue_ids', '');
SELECT pg_catalog.pg_extension_config_dump('jq_queue_ids_seq', '');

-- Tell every session to forget the queue settings it keeps when they change (src/api/settings.rs),
-- through the one trigger function of the tables sessions keep something of (its path pinned like
-- every other function's; the trigger on jq_grants uses it too).
ALTER FUNCTION jq_table_changed() SET search_path = pg_catalog, @extschema@, pg_temp;
CREATE TRIGGER jq_settings_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jq_queues
    FOR EACH STATEMENT EXECUTE FUNCTION jq_table_changed();
-- INSERT too: a first enqueue's number, kept by its session, is forgotten if its transaction
-- rolls back (PostgreSQL replays a rolled-back transaction's invalidations in its own session).
CREATE TRIGGER jq_settings_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jq_queue_ids
    FOR EACH STATEMENT EXECUTE FUNCTION jq_table_changed();
SELECT pg_catalog.pg_extension_config_dump('jq_live_jobs', '');
SELECT pg_catalog.pg_extension_config_dump('jq_job_history_default', '');

-- The figures views. Each shows a role only the queues it may see (jq_can_see: any right on the
-- queue, membership in pg_monitor, or the owner's rights); security_barrier keeps a caller's own
-- functions in WHERE from seeing rows before that filter.
--
-- One row per queue that has a settings row or any live, dead or cancelled job. Each part reads one
-- partial index, so the cost grows with live and unresolved jobs, not with succeeded history. The
-- clock is read once, and it is the clock the claim uses: "pending" means what jq_claim would take.
CREATE OR REPLACE VIEW jq_queue_stats WITH (security_barrier) AS
WITH clock AS MATERIALIZED (
    SELECT pg_catalog.clock_timestamp() AS now
), pending AS (
    SELECT n.queue_name,
           pg_catalog.count(*) FILTER (WHERE j.available_at <= c.now) AS pending,
           pg_catalog.count(*) FILTER (WHERE j.available_at > c.now) AS scheduled,
           pg_catalog.min(j.available_at) FILTER (WHERE j.available_at <= c.now) AS oldest_claimable
    FROM jq_live_jobs j JOIN jq_queue_ids n USING (queue_id), clock c
    WHERE j.status OPERATOR(pg_catalog.=) 'pending' GROUP BY n.queue_name
), running AS (
    SELECT n.queue_name,
           pg_catalog.count(*) AS running,
           pg_catalog.count(*) FILTER (WHERE j.lease_expires_at <= c.now + interval '10 seconds') AS expiring
    FROM jq_live_jobs j JOIN jq_queue_ids n USING (queue_id), clock c
    WHERE j.status OPERATOR(pg_catalog.=) 'running' GROUP BY n.queue_name
), unresolved AS (
    SELECT n.queue_name,
           pg_catalog.count(*) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'dead') AS dead,
           pg_catalog.count(*) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'cancelled') AS cancelled,
           pg_catalog.min(j.finished_at) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'dead') AS oldest_dead
    FROM jq_live_jobs j JOIN jq_queue_ids n USING (queue_id)
    WHERE j.status OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'cancelled']::jq_status[]) GROUP BY n.queue_name
), keys AS (
    -- Flow control (guide, "Flow control"): each concurrency key's claimable jobs, whether its
    -- running jobs (under a current lease, as the limit counts them) are at its limit, and whether
    -- its rate's window is used up.
    SELECT n.queue_name, k.due,
           coalesce(s.concurrency_limit, q.key_concurrency_limit) <= (
               SELECT pg_catalog.count(*) FROM jq_live_jobs r
               WHERE r.queue_id = k.queue_id AND r.concurrency_key = k.concurrency_key
                 AND r.status OPERATOR(pg_catalog.=) 'running' AND r.lease_expires_at > k.now) AS at_limit,
           q.key_rate_limit <= (
               SELECT rc.claims FROM jq_rate_counts rc
               WHERE rc.queue_id = k.queue_id AND rc.concurrency_key = k.concurrency_key
                 AND rc.window_start > k.now - q.key_rate_period) AS rate_used_up
    FROM (
        SELECT j.queue_id, j.concurrency_key, c.now, pg_catalog.count(*) AS due
        FROM jq_live_jobs j, clock c
        WHERE j.status OPERATOR(pg_catalog.=) 'pending' AND j.concurrency_key IS NOT NULL AND j.available_at <= c.now
        GROUP BY j.queue_id, j.concurrency_key, c.now
    ) AS k
    JOIN jq_queue_ids n ON n.queue_id = k.queue_id
    LEFT JOIN jq_queues q ON q.queue_name = n.queue_name
    LEFT JOIN jq_key_settings s ON s.queue_name = n.queue_name AND s.concurrency_key = k.concurrency_key
), held AS (
    SELECT k.queue_name,
           pg_catalog.sum(k.due) FILTER (WHERE k.at_limit) AS by_key_limit,
           pg_catalog.sum(k.due) FILTER (WHERE k.rate_used_up) AS by_key_rate
    FROM keys k GROUP BY k.queue_name
), queues AS (
    SELECT q.queue_name FROM jq_queues q
    UNION SELECT p.queue_name FROM pending p
    UNION SELECT r.queue_name FROM running r
    UNION SELECT u.queue_name FROM unresolved u
)
SELECT q.queue_name,
       coalesce(p.pending, 0)   AS pending,
       coalesce(p.scheduled, 0) AS scheduled,
       coalesce(r.running, 0)   AS running,
       coalesce(r.expiring, 0)  AS expiring_10s,
       coalesce(u.dead, 0)      AS dead,
       coalesce(u.cancelled, 0) AS cancelled,
       c.now - p.oldest_claimable AS oldest_claimable_age,
       c.now - u.oldest_dead      AS oldest_dead_age,
       -- Claimable jobs each limit holds back now: all of them while the queue runs its
       -- concurrency_limit or has used up its rate's window; a key's, while the key does.
       CASE WHEN s.concurrency_limit <= coalesce(r.running, 0) THEN coalesce(p.pending, 0) ELSE 0 END
           AS held_by_concurrency_limit,
       coalesce(h.by_key_limit, 0)::bigint AS held_by_key_limit,
       CASE WHEN s.rate_limit <= (SELECT rc.claims FROM jq_rate_counts rc JOIN jq_queue_ids n USING (queue_id)
                                  WHERE n.queue_name = q.queue_name AND rc.concurrency_key = ''
                                    AND rc.window_start > c.now - s.rate_period)
            THEN coalesce(p.pending, 0) ELSE 0 END AS held_by_rate_limit,
       coalesce(h.by_key_rate, 0)::bigint AS held_by_key_rate_limit,
       -- A paused queue's claimable jobs all wait for jq_configure(queue, '{"paused": false}').
       CASE WHEN s.paused THEN coalesce(p.pending, 0) ELSE 0 END AS held_by_pause
FROM queues q
CROSS JOIN clock c
LEFT JOIN pending p USING (queue_name)
LEFT JOIN running r USING (queue_name)
LEFT JOIN unresolved u USING (queue_name)
LEFT JOIN held h USING (queue_name)
LEFT JOIN jq_queues s USING (queue_name)
WHERE jq_can_see(q.queue_name);

-- What operators alert on, per queue: the oldest claimable job's age, running jobs whose lease ends
-- within 10 s, the oldest dead job's age (dead and neither re-driven nor purged), each with its
-- threshold from jq_queues (the defaults written there for a queue without a row) and a flag.
CREATE OR REPLACE VIEW jq_queue_health WITH (security_barrier) AS
SELECT s.queue_name,
       s.oldest_claimable_age,
       s.expiring_10s AS expiring_leases,
       s.oldest_dead_age,
       t.warn_claimable_age,
       t.warn_expiring_leases,
       t.warn_dead_age,
       coalesce(s.oldest_claimable_age > t.warn_claimable_age, false) AS claimable_age_warning,
       coalesce(s.expiring_10s >= t.warn_expiring_leases, false)     AS expiring_leases_warning,
       coalesce(s.oldest_dead_age > t.warn_dead_age, false)           AS dead_age_warning,
       -- Slow because limited, not for want of workers: claimable jobs some limit holds back (the
       -- largest of jq_queue_stats' held_by_ figures, which may overlap; a pause holds back all).
       greatest(s.held_by_concurrency_limit, s.held_by_key_limit, s.held_by_rate_limit,
                s.held_by_key_rate_limit, s.held_by_pause) AS held_back,
       coalesce(q.paused, false) AS paused,
       -- Nothing maintains the queue's database lately (jq_maintenance): expired leases, ticks
       -- and retention wait.
       (SELECT m.stale FROM jq_maintenance_status() m) AS maintenance_stale
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

-- Who maintains this database, `worker`, `inline` (claims) or `none`, when each pass last ran,
-- and whether one is overdue (guide, "Maintenance").
CREATE VIEW jq_maintenance AS SELECT * FROM jq_maintenance_status();

-- The jobs, and their events, of the queues the caller may manage: what an operator reads to decide
-- on a re-drive or a cancel, without a right on the tables (guide, "Security").
CREATE VIEW jq_managed_jobs WITH (security_barrier) AS
SELECT j.* FROM jq_jobs j WHERE jq_has_right(j.queue_name, 'manage');

CREATE VIEW jq_managed_job_events WITH (security_barrier) AS
SELECT e.* FROM jq_job_events e WHERE jq_has_right(e.queue_name, 'manage');

-- The schedules of the queues the caller may manage (guide, "Schedules"): each one's settings, its
-- last and next run (none while paused), and the status of the job it enqueued last.
CREATE VIEW jq_schedules WITH (security_barrier) AS
SELECT s.name, s.cron, s.time_zone, s.queue_name, s.payload, s.paused, s.last_run,
       CASE WHEN s.paused THEN NULL ELSE s.next_run END AS next_run, s.last_job_id,
       (SELECT j.status FROM jq_jobs j WHERE j.id = s.last_job_id) AS last_job_status,
       s.catch_up, s.catch_up_limit, s.priority, s.max_attempts, s.dedup_key, s.ordering_key,
       s.concurrency_key, s.created_at
FROM jq_schedule_specs s
WHERE jq_has_right(s.queue_name, 'manage');

-- Every function of 0.2.0 pins pg_catalog first, as the new ones do.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::regclass
                                   AND d.objid OPERATOR(pg_catalog.=) p.oid
                                   AND d.deptype OPERATOR(pg_catalog.=) 'e'
        JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
                                      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::regclass
        WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'
          AND EXISTS (SELECT 1 FROM pg_catalog.unnest(p.proconfig) AS c(setting)
                      WHERE c.setting LIKE 'search_path=%' AND c.setting NOT LIKE 'search_path=pg_catalog,%')
    LOOP
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path = pg_catalog, @extschema@, pg_temp', f);
    END LOOP;
END
$$;

-- Rights (guide, "Security"). The jq_* functions are the only door: no role but the owner has a
-- right on the tables, and no function is executable by PUBLIC. jq_grant gives a role a privilege
-- on a queue (or a prefix pattern) and EXECUTE on the functions that privilege uses; jq_revoke
-- takes them back. pg_monitor reads every queue's figures and nothing else.

-- Every function of the extension: EXECUTE for the owner and those it grants it to, not PUBLIC.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc p
        JOIN pg_catalog.pg_depend d ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::regclass
                                   AND d.objid OPERATOR(pg_catalog.=) p.oid
                                   AND d.deptype OPERATOR(pg_catalog.=) 'e'
        JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
                                      AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::regclass
        WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'
    LOOP
        EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f);
    END LOOP;
END
$$;

-- Tell every session to forget its cached rights when jq_grants changes (src/rights.rs).
CREATE TRIGGER jq_grants_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jq_grants
    FOR EACH STATEMENT EXECUTE FUNCTION jq_table_changed();

-- Which functions each privilege calls; 'any' for those every holder of a right may call (the
-- figures of the queues it may see).
CREATE FUNCTION jq_privilege_functions() RETURNS TABLE (privilege text, function_name name)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
    VALUES ('enqueue', 'jq_enqueue'::name), ('enqueue', 'jq_enqueue_batch'),
           ('consume', 'jq_claim'), ('consume', 'jq_heartbeat'), ('consume', 'jq_complete'),
           ('consume', 'jq_complete_batch'), ('consume', 'jq_fail'), ('consume', 'jq_progress'),
           ('consume', 'jq_progress_of'), ('consume', 'jq_snooze'),
           -- A job's outcome: for whoever may put work in or take it out (guide, "Results and waiting").
           ('enqueue', 'jq_result'), ('enqueue', 'jq_await'), ('consume', 'jq_result'), ('consume', 'jq_await'),
           ('manage', 'jq_result'), ('manage', 'jq_await'),
           ('manage', 'jq_retry'), ('manage', 'jq_cancel'), ('manage', 'jq_retry_dead'),
           ('manage', 'jq_purge_dead'), ('manage', 'jq_configure'), ('manage', 'jq_configure_key'),
           ('manage', 'jq_schedule'), ('manage', 'jq_unschedule'), ('manage', 'jq_pause_schedule'),
           ('manage', 'jq_resume_schedule'), ('any', 'jq_cron_next'),
           ('any', 'jq_can_see'), ('any', 'jq_has_right'), ('any', 'jq_queue_counters'),
           ('any', 'jq_failure_counts'), ('any', 'jq_metrics'), ('any', 'jq_maintenance_status')
$$;

-- Gives `role` EXECUTE on exactly the functions its rows in jq_grants call for (and SELECT on the
-- figures views and USAGE on the schema while it has any), taking back what it no longer needs.
-- pg_monitor keeps the figures it was given at install, whatever it is granted or not.
CREATE FUNCTION jq_sync_function_rights(role regrole) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    f record;
    holds_any boolean := EXISTS (SELECT 1 FROM jq_grants g
                                 WHERE g.role::oid OPERATOR(pg_catalog.=) jq_sync_function_rights.role::oid)
                         OR jq_sync_function_rights.role::oid OPERATOR(pg_catalog.=) 'pg_monitor'::regrole::oid;
BEGIN
    FOR f IN
        -- A function some privileges share is wanted if any of them is held.
        SELECT p.oid::regprocedure AS signature,
               -- pg_monitor keeps the figures it was given at install, whatever it is granted or not.
               pg_catalog.bool_or(
                   CASE WHEN m.privilege OPERATOR(pg_catalog.=) 'any' THEN holds_any
                        ELSE EXISTS (SELECT 1 FROM jq_grants g
                                     WHERE g.role::oid OPERATOR(pg_catalog.=) jq_sync_function_rights.role::oid
                                       AND g.privilege OPERATOR(pg_catalog.=) m.privilege) END) AS wanted
        FROM jq_privilege_functions() m
        JOIN pg_catalog.pg_proc p ON p.proname OPERATOR(pg_catalog.=) m.function_name
                                 AND p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::regnamespace
        GROUP BY p.oid
    LOOP
        IF f.wanted THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f.signature, role);
        ELSE
            EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %s', f.signature, role);
        END IF;
    END LOOP;
    -- USAGE on the schema is jq_grant's to give and jq_revoke's to take back with the last right
    -- (guide, "Security"); the event trigger below takes it back when the extension is dropped.
    IF holds_any THEN
        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %s TO %s', '@extschema@'::regnamespace, role);
        EXECUTE pg_catalog.format('GRANT SELECT ON jq_queue_stats, jq_queue_health, jq_maintenance TO %s', role);
    ELSE
        EXECUTE pg_catalog.format('REVOKE SELECT ON jq_queue_stats, jq_queue_health, jq_maintenance FROM %s', role);
        EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA %s FROM %s', '@extschema@'::regnamespace, role);
    END IF;
    IF EXISTS (SELECT 1 FROM jq_grants g
               WHERE g.role::oid OPERATOR(pg_catalog.=) jq_sync_function_rights.role::oid
                 AND g.privilege OPERATOR(pg_catalog.=) 'manage') THEN
        EXECUTE pg_catalog.format('GRANT SELECT ON jq_managed_jobs, jq_managed_job_events, jq_schedules TO %s', role);
    ELSE
        EXECUTE pg_catalog.format('REVOKE SELECT ON jq_managed_jobs, jq_managed_job_events, jq_schedules FROM %s', role);
    END IF;
END
$$;

-- The argument checks of jq_grant and jq_revoke: 22004 for NULL, 22023 for a bad value, each naming
-- the argument, before anything is written.
CREATE FUNCTION jq_check_grant_arguments(role regrole, queue text, privilege text) RETURNS void
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    IF role IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'role must not be NULL';
    ELSIF queue IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'queue must not be NULL';
    ELSIF privilege IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22004', MESSAGE = 'privilege must not be NULL';
    ELSIF queue OPERATOR(pg_catalog.!~) '^([A-Za-z0-9_.:-]{1,60}|[A-Za-z0-9_.:-]{0,59}[*])$' THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'queue must be a queue name, or a prefix followed by * (''*'' alone: every queue)';
    ELSIF privilege OPERATOR(pg_catalog.<>) ALL (ARRAY['enqueue', 'consume', 'manage', 'monitor']) THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = 'privilege must be one of enqueue, consume, manage, monitor';
    END IF;
END
$$;

-- jq_grant(role, queue, privilege): `role` may from now on use `privilege` on the queue, or on every
-- queue the pattern matches. Only the owner (and those it trusts with every queue: whoever may run
-- this may grant itself anything) may call it.
CREATE FUNCTION jq_grant(role regrole, queue text, privilege text) RETURNS void
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    PERFORM jq_check_grant_arguments(role, queue, privilege);
    INSERT INTO jq_grants (role, queue, privilege) VALUES (role, queue, privilege) ON CONFLICT DO NOTHING;
    PERFORM jq_sync_function_rights(role);
END
$$;

-- jq_revoke(role, queue, privilege): takes back exactly what one jq_grant gave (the same queue or
-- pattern); says whether there was such a right.
CREATE FUNCTION jq_revoke(role regrole, queue text, privilege text) RETURNS boolean
LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    revoked boolean;
BEGIN
    PERFORM jq_check_grant_arguments(role, queue, privilege);
    DELETE FROM jq_grants g
    WHERE g.role::oid OPERATOR(pg_catalog.=) jq_revoke.role::oid
      AND g.queue OPERATOR(pg_catalog.=) jq_revoke.queue
      AND g.privilege OPERATOR(pg_catalog.=) jq_revoke.privilege;
    revoked := FOUND;
    PERFORM jq_sync_function_rights(role);
    RETURN revoked;
END
$$;

REVOKE ALL ON FUNCTION jq_privilege_functions(), jq_sync_function_rights(regrole),
                       jq_check_grant_arguments(regrole, text, text),
                       jq_grant(regrole, text, text), jq_revoke(regrole, text, text) FROM PUBLIC;

-- The schema outlives the extension (one the DBA made for it, or public): at DROP EXTENSION, take
-- back the USAGE on it that jq_grant gave and pg_monitor got below (src/api/rights.rs). An event
-- trigger that fires at the start of DROP EXTENSION only, and returns at once for any other.
CREATE FUNCTION jq_extension_dropped() RETURNS event_trigger
LANGUAGE c
SET search_path = pg_catalog, @extschema@, pg_temp
AS 'MODULE_PATHNAME', 'jq_extension_dropped';
REVOKE ALL ON FUNCTION jq_extension_dropped() FROM PUBLIC;
CREATE EVENT TRIGGER jq_extension_dropped ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION')
    EXECUTE FUNCTION jq_extension_dropped();

-- Monitoring: members of the built-in pg_monitor role read every queue's figures (the views,
-- jq_metrics and the counters) and gain nothing else.
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT SELECT ON jq_queue_stats, jq_queue_health, jq_maintenance TO pg_monitor;
GRANT EXECUTE ON FUNCTION jq_can_see(text), jq_metrics(), jq_queue_counters(), jq_failure_counts(),
    jq_maintenance_status() TO pg_monitor;

-- Roles that had rights on the tables under 0.2.0 (where the functions ran as their callers) keep
-- what those let them do, as rights on every queue: INSERT on jq_jobs as enqueue, UPDATE on jq_jobs
-- as consume, UPDATE on jq_queues as manage, SELECT on jq_jobs as monitor. Then the tables are the
-- owner's alone: the functions are the only door.
DO $$
DECLARE
    grantee oid;
    target text;
BEGIN
    INSERT INTO jq_grants (role, queue, privilege)
    SELECT DISTINCT a.grantee::regrole, '*', m.privilege
    FROM (VALUES ('jq_jobs_0_2_0', 'INSERT', 'enqueue'), ('jq_jobs_0_2_0', 'UPDATE', 'consume'),
                 ('jq_queues', 'UPDATE', 'manage'), ('jq_jobs_0_2_0', 'SELECT', 'monitor')) AS m(relation, right_name, privilege)
    JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(m.relation)
    CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
    WHERE a.privilege_type OPERATOR(pg_catalog.=) m.right_name
      AND a.grantee OPERATOR(pg_catalog.<>) 0
      AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    ON CONFLICT DO NOTHING;
    FOR grantee IN
        SELECT DISTINCT a.grantee
        FROM pg_catalog.pg_class c
        CROSS JOIN LATERAL pg_catalog.aclexplode(c.relacl) a
        WHERE c.oid OPERATOR(pg_catalog.=) ANY (ARRAY[pg_catalog.to_regclass('jq_jobs_0_2_0'), pg_catalog.to_regclass('jq_queues'),
                                                 pg_catalog.to_regclass('jq_job_events'), pg_catalog.to_regclass('jq_jobs_id_seq'),
                                                 pg_catalog.to_regclass('jq_job_events_id_seq')]::oid[])
          AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        target := CASE WHEN grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE grantee::regrole::text END;
        EXECUTE pg_catalog.format('REVOKE ALL ON jq_queues, jq_job_events FROM %s', target);
        EXECUTE pg_catalog.format('REVOKE ALL ON SEQUENCE jq_jobs_id_seq, jq_job_events_id_seq FROM %s', target);
        IF grantee OPERATOR(pg_catalog.<>) 0 THEN
            PERFORM jq_sync_function_rights(grantee::regrole);
        END IF;
    END LOOP;
END
$$;

-- The jobs are in the new tables, and the rights of 0.2.0 read. Leaving the extension first takes
-- the table out of what pg_dump keeps as configuration (dropping it alone would leave its oid there).
ALTER EXTENSION pg_jobqueue DROP TABLE jq_jobs_0_2_0;
DROP TABLE jq_jobs_0_2_0;
