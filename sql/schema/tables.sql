-- pg_jobqueue schema. The tables are the truth; the jq_* functions change them only through guarded
-- UPDATEs whose WHERE states the whole precondition of each transition.

CREATE TYPE jq_status AS ENUM ('pending', 'running', 'succeeded', 'dead', 'cancelled');

-- Per-queue settings. A queue without a row uses the defaults written here. Constraints refuse bad
-- settings instead of storing them; the names follow the same rule the functions enforce.
CREATE TABLE jq_queues (
    queue_name    text PRIMARY KEY
                  CONSTRAINT jq_queues_name_valid CHECK (queue_name ~ '^[A-Za-z0-9_.:-]{1,60}$'),
    default_lease interval NOT NULL DEFAULT '60 seconds'
                  CONSTRAINT jq_queues_default_lease_positive CHECK (default_lease > interval '0'),
    max_attempts  int NOT NULL DEFAULT 8
                  CONSTRAINT jq_queues_max_attempts_positive CHECK (max_attempts >= 1),
    backoff_base  interval NOT NULL DEFAULT '1 second'
                  CONSTRAINT jq_queues_backoff_base_positive CHECK (backoff_base > interval '0'),
    backoff_cap   interval NOT NULL DEFAULT '1 hour',
    -- NULL: no limit. Otherwise no lease (claim or heartbeat) reaches past claim time + max_runtime.
    max_runtime   interval
                  CONSTRAINT jq_queues_max_runtime_positive CHECK (max_runtime > interval '0'),
    paused        boolean NOT NULL DEFAULT false,
    -- NULL: no limit. Otherwise at most this many jobs of the queue run at once, across all workers.
    concurrency_limit int
                  CONSTRAINT jq_queues_concurrency_limit_positive CHECK (concurrency_limit >= 1),
    -- Fairness: a job claimable for longer than this is claimed before fresher jobs, whatever their
    -- priority. NULL: strict priority order, with no bound on how long a low priority can wait.
    starvation_limit interval DEFAULT '5 minutes'
                  CONSTRAINT jq_queues_starvation_limit_positive CHECK (starvation_limit > interval '0'),
    -- Succeeded and cancelled jobs older than this are deleted by jq_prune(). NULL: keep them.
    -- Dead jobs are never pruned: they wait for an operator (jq_retry_dead, jq_purge_dead).
    retention     interval DEFAULT '7 days'
                  CONSTRAINT jq_queues_retention_positive CHECK (retention > interval '0'),
    -- Whether committed enqueues send NOTIFY "jq_<queue_name>" (LISTEN wake-ups): true always,
    -- false never, NULL while someone listens, which only a preloaded library can tell (without
    -- preload: never). A session keeps it until it changes (src/api/settings.rs).
    notify        boolean,
    -- jq_queue_health warns when a figure passes its threshold; NULL: never.
    warn_claimable_age   interval DEFAULT '5 minutes'
                  CONSTRAINT jq_queues_warn_claimable_age_positive CHECK (warn_claimable_age > interval '0'),
    warn_expiring_leases int DEFAULT 10
                  CONSTRAINT jq_queues_warn_expiring_leases_positive CHECK (warn_expiring_leases >= 1),
    warn_dead_age        interval DEFAULT '1 hour'
                  CONSTRAINT jq_queues_warn_dead_age_not_negative CHECK (warn_dead_age >= interval '0'),
    -- NULL: no limit. Otherwise at most this many jobs of one concurrency key run at once, counting
    -- jobs whose lease is current (guide, "Flow control").
    key_concurrency_limit int
                  CONSTRAINT jq_queues_key_concurrency_limit_positive CHECK (key_concurrency_limit >= 1),
    -- Rate limits (guide, "Flow control"): at most rate_limit claims of the queue's jobs in each
    -- window of rate_period, and at most key_rate_limit of one concurrency key's in each window of
    -- key_rate_period, windows aligned to the Unix epoch. NULL: no limit. Each is set with its period.
    rate_limit    int
                  CONSTRAINT jq_queues_rate_limit_positive CHECK (rate_limit >= 1),
    rate_period   interval
                  CONSTRAINT jq_queues_rate_period_positive CHECK (rate_period > interval '0'),
    key_rate_limit int
                  CONSTRAINT jq_queues_key_rate_limit_positive CHECK (key_rate_limit >= 1),
    key_rate_period interval
                  CONSTRAINT jq_queues_key_rate_period_positive CHECK (key_rate_period > interval '0'),
    -- false: a successful completion deletes the job, with its events and result, instead of
    -- keeping it in jq_job_history (guide, "Queues that keep nothing").
    keep_succeeded boolean NOT NULL DEFAULT true,
    CONSTRAINT jq_queues_backoff_cap_ge_base CHECK (backoff_cap >= backoff_base),
    CONSTRAINT jq_queues_rate_paired CHECK ((rate_limit IS NULL) = (rate_period IS NULL)),
    CONSTRAINT jq_queues_key_rate_paired CHECK ((key_rate_limit IS NULL) = (key_rate_period IS NULL))
);

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
    ordering_keys boolean NOT NULL DEFAULT false,
    -- Some job of the queue has had a priority other than 0: set by the first such enqueue, never
    -- cleared. Until then its claims walk one priority of the claim index (src/api/claim/take.rs).
    priorities boolean NOT NULL DEFAULT false
);

-- A plain sequence rather than an identity column: pg_dump can then keep its position through
-- pg_extension_config_dump, so a restored queue never reuses a job id.
CREATE SEQUENCE jq_jobs_id_seq;

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
    -- Workflows (guide, "Workflows"): the jobs this one depends on (NULL: none), and how many of
    -- them have not succeeded yet. A pending job with `awaiting` above 0 is held: in neither claim
    -- index, so no claim ever reads it; the completion of its last dependency makes it claimable.
    depends_on       bigint[],
    awaiting         int NOT NULL DEFAULT 0
    -- What the table itself enforces, whatever code path changes a row (the attempt budget, and a
    -- lease exactly while the job runs), is the CHECK constraint jq_live_jobs_consistent, added in
    -- constraints.sql once the function it calls exists.
);

-- Eight indexes, each for the statements named (guide, "Storage"):

-- The claim index: only pending rows without a concurrency key, keyed in the claim's own order after the queue. A claim walks
-- it from the claim front and stops after batch_size rows: it never sorts. It also answers the
-- fairness check (is a job of some priority older than the starvation limit?) with one probe per
-- priority present, each the oldest entry of its priority, and the waiting claim's "is anything due,
-- and when next?" the same way (claim.sql, parts/pending_levels.sql, claim_front.sql).
-- An index in arrival order would answer those with one probe, and cost every enqueue an insertion.
CREATE INDEX jq_live_jobs_claim ON jq_live_jobs (queue_id, priority DESC, available_at, id)
    WHERE status OPERATOR(pg_catalog.=) 'pending' AND awaiting = 0 AND concurrency_key IS NULL;

-- The key claim index: the pending rows with a concurrency key, which claims take key by key in
-- turn (guide, "Flow control"), so keyed by key first, then in the claim's own order within the
-- key. A pending job is in exactly one of the two claim indexes: a key costs its jobs nothing more.
-- The rotation finds the next key with pending jobs by one probe (claim_keys.sql), and a key's
-- first jobs by one range (claim_keyed.sql).
CREATE INDEX jq_live_jobs_key_claim ON jq_live_jobs (queue_id, concurrency_key, priority DESC, available_at, id)
    WHERE status OPERATOR(pg_catalog.=) 'pending' AND awaiting = 0 AND concurrency_key IS NOT NULL;

-- Held jobs (guide, "Workflows"): pending, waiting for a dependency to succeed. Neither claim
-- index has them; jq_queue_stats counts them here (held_by_dependency).
CREATE INDEX jq_live_jobs_held ON jq_live_jobs (queue_id)
    WHERE status OPERATOR(pg_catalog.=) 'pending' AND awaiting > 0;

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
    result             jsonb,
    depends_on         bigint[]
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

-- A large fan-in's count, in 16 parts (guide, "Workflows"). A job with more than 16 dependencies has
-- one row per part here, from its enqueue until it leaves jq_live_jobs: the dependencies whose id is
-- `part` modulo 16 that it still waits for. Its `awaiting` in jq_live_jobs then counts the parts
-- that are not yet 0. A completion counts down the part of its id, and the job's row only when that
-- part reaches 0: jobs completing side by side, which have neighbouring ids, update different rows
-- instead of all waiting for the lock on the one row of the job they lead to, each until the one
-- before it has committed.
CREATE TABLE jq_dependency_parts (
    job_id   bigint NOT NULL,
    part     int NOT NULL,
    awaiting int NOT NULL,
    CONSTRAINT jq_dependency_parts_pkey PRIMARY KEY (job_id, part)
);

-- One row per job, with the columns jq_jobs always had, whichever table holds the job. A job moves between them
-- only inside one statement, so every snapshot sees it exactly once.
CREATE VIEW jq_jobs AS
SELECT j.id, q.queue_name, j.payload, j.status, j.priority, j.available_at, j.attempt_count,
       j.max_attempts, j.lease_owner, j.lease_token, j.lease_expires_at, j.lease_length, j.claimed_at,
       j.run_deadline, j.last_error_code, j.last_error_message, j.dedup_key, j.ordering_key,
       j.created_at, j.finished_at, j.concurrency_key, j.expires_at, j.progress, NULL::jsonb AS result,
       j.depends_on,
       -- A job with more than 16 dependencies counts, in its row, its parts not yet at 0
       -- (jq_dependency_parts); what it still waits for is the sum of its parts.
       CASE WHEN j.awaiting > 0 AND pg_catalog.cardinality(j.depends_on) > 16
            THEN (SELECT pg_catalog.sum(p.awaiting)::int FROM jq_dependency_parts p WHERE p.job_id = j.id)
            ELSE j.awaiting END AS awaiting
FROM jq_live_jobs j
JOIN jq_queue_ids q ON q.queue_id = j.queue_id
UNION ALL
SELECT h.id, q.queue_name, h.payload, 'succeeded'::jq_status, h.priority, h.available_at,
       h.attempt_count, h.max_attempts, NULL::text, h.lease_token, NULL::timestamptz, h.lease_length,
       h.claimed_at, h.run_deadline, h.last_error_code, h.last_error_message, h.dedup_key,
       h.ordering_key, h.created_at, h.finished_at, h.concurrency_key, h.expires_at, h.progress, h.result,
       h.depends_on, 0
FROM jq_job_history h
JOIN jq_queue_ids q ON q.queue_id = h.queue_id;

-- Workflows (guide, "Workflows"): one row per job in jq_live_jobs and each job it depends on, from
-- its enqueue until it leaves jq_live_jobs (completed, pruned or purged). Keyed by the dependency
-- first: a completion finds the jobs waiting for it, a failure those to cancel, retention those
-- still running or pending on a job it would remove. A job's own rows are found by its
-- `depends_on` and its id, the same key.
CREATE TABLE jq_job_dependencies (
    depends_on bigint NOT NULL,
    job_id     bigint NOT NULL,
    -- Whether the job counts its dependencies in parts (jq_dependency_parts): what a completion
    -- of the dependency counts down, read with the row that finds the job.
    parted     boolean NOT NULL DEFAULT false,
    -- Whether the job's count no longer includes this dependency: it had ended when the job was
    -- enqueued (or re-driven), or its end has been counted since. The end of a dependency is
    -- counted once per row, by whichever statement turns this true (src/api/dependencies.rs).
    settled    boolean NOT NULL DEFAULT false,
    CONSTRAINT jq_job_dependencies_pkey PRIMARY KEY (depends_on, job_id)
);

-- The rows whose dependency's end is still to be counted: a job's completion, death or
-- cancellation settles its own, and the reap pass those of jobs that ended with more than a call
-- settles, or that ended while the enqueue naming them was still open (src/api/dependencies.rs).
CREATE INDEX jq_job_dependencies_unsettled ON jq_job_dependencies (depends_on) WHERE NOT settled;

CREATE SEQUENCE jq_job_events_id_seq;

-- The audit trail: one row per failure, lease expiry, re-drive, cancellation (an expiry too) and
-- snooze. `status` is the job's
-- status after the event, so a death is an event whose status is 'dead'. The happy path (claim,
-- heartbeat, complete) writes nothing here.
CREATE TABLE jq_job_events (
    id            bigint PRIMARY KEY DEFAULT pg_catalog.nextval('jq_job_events_id_seq'::pg_catalog.regclass),
    -- No foreign key: the job is in jq_live_jobs or in jq_job_history. The functions that delete
    -- jobs (jq_prune, jq_purge_dead) delete their events with them.
    job_id        bigint NOT NULL,
    queue_name    text NOT NULL,
    event         text NOT NULL
                  CONSTRAINT jq_job_events_event_known
                  CHECK (event IN ('failed', 'lease_expired', 'retried', 'cancelled', 'snoozed')),
    status        jq_status NOT NULL,
    at            timestamptz NOT NULL,
    attempt       int NOT NULL,
    worker        text,
    lease_token   bigint NOT NULL,
    error_code    text,
    error_message text
);

-- A job's history in order, and the deletion of a deleted job's events.
CREATE INDEX jq_job_events_job ON jq_job_events (job_id, id);

-- Events are append-only: plain insert-driven vacuum is enough.

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

-- The roles the extension gave USAGE on its schema (jq_grant with a role's first right, and
-- pg_monitor at install), for jq_revoke and DROP EXTENSION to take back those and no other: a role
-- that held USAGE there already (granted by the DBA) keeps it (sql/schema/rights.sql).
CREATE TABLE jq_schema_usage (
    role oid PRIMARY KEY
);

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

-- What the rate limits counted (guide, "Flow control"): for the queue ('') and for each
-- concurrency key, the claims of the latest window counted. Written only by claims that hold the
-- queue's or the key's lock (src/api/rates.rs, src/api/keys.rs), so never waited on; a claim that
-- counts here commits durably, so a crash loses no counted claim whose job a worker was handed.
CREATE TABLE jq_rate_counts (
    queue_id        int NOT NULL,
    concurrency_key text NOT NULL,   -- '': the queue's own rate; a concurrency key is never empty
    window_start    timestamptz NOT NULL,
    claims          int NOT NULL,
    CONSTRAINT jq_rate_counts_pkey PRIMARY KEY (queue_id, concurrency_key)
);

-- When a claim last ran each maintenance pass in this database, for databases no background worker
-- serves (guide, "Maintenance"): a claim takes a due pass by locking its row (SKIP LOCKED, so no
-- claim waits for another's) and marking it. The worker's passes are kept in shared memory instead,
-- so that a pass that finds nothing to do writes nothing. The view jq_maintenance shows both.
CREATE TABLE jq_maintenance_passes (
    pass    text CONSTRAINT jq_maintenance_passes_pkey PRIMARY KEY,
    last_at timestamptz NOT NULL
);
INSERT INTO jq_maintenance_passes (pass, last_at) VALUES ('reap', '-infinity'), ('prune', '-infinity');

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

-- Fencing tokens that outlive a crash (guide, "Durable claims"). A transaction that only claims
-- commits without waiting for its WAL flush, so a crash can lose a claim and the token it handed
-- out. Every token is therefore at least epoch * 2^32 for the highest epoch here, and the first
-- claim of each server lifetime (named by `replayed_to` and `timeline`) that has no row yet adds
-- one, one epoch higher, durably, before any token of it leaves the server: no token handed out
-- before a crash can be handed out again. A row per lifetime (two sessions racing may add one
-- each, with the same epoch), never updated, so no claim waits on another's. pg_dump keeps them,
-- so a restored database goes on above them.
CREATE TABLE jq_token_epochs (
    epoch       bigint NOT NULL CONSTRAINT jq_token_epochs_bounded CHECK (epoch BETWEEN 0 AND 2147483647),
    replayed_to bigint NOT NULL,
    timeline    bigint NOT NULL
);

-- Exact comparison operators for jq_status, and its default operator classes (guide, "Security").
-- PostgreSQL compares an enum with its polymorphic =(anyenum, anyenum): an exact
-- =(jq_status, jq_status) that another role created in a schema on a caller's search_path would
-- be chosen over it, in the caller's own queries (`WHERE status = 'dead'`). These are those exact
-- signatures, in the extension's schema: no role can create them there again, and one made in a
-- schema later on the path is never chosen. Each is PostgreSQL's own enum comparison (an exact
-- signature needs a function of its own). Made after the indexes, which keep PostgreSQL's enum
-- operator class, as the extension's own statements name PostgreSQL's operators.
CREATE FUNCTION jq_status_eq(a jq_status, b jq_status) RETURNS boolean
    LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE AS 'enum_eq';
CREATE FUNCTION jq_status_ne(a jq_status, b jq_status) RETURNS boolean
    LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE AS 'enum_ne';
CREATE FUNCTION jq_status_lt(a jq_status, b jq_status) RETURNS boolean
    LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE AS 'enum_lt';
CREATE FUNCTION jq_status_le(a jq_status, b jq_status) RETURNS boolean
    LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE AS 'enum_le';
CREATE FUNCTION jq_status_gt(a jq_status, b jq_status) RETURNS boolean
    LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE AS 'enum_gt';
CREATE FUNCTION jq_status_ge(a jq_status, b jq_status) RETURNS boolean
    LANGUAGE internal IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE AS 'enum_ge';

CREATE OPERATOR = (LEFTARG = jq_status, RIGHTARG = jq_status, FUNCTION = jq_status_eq,
    COMMUTATOR = =, NEGATOR = <>, RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel, HASHES, MERGES);
CREATE OPERATOR <> (LEFTARG = jq_status, RIGHTARG = jq_status, FUNCTION = jq_status_ne,
    COMMUTATOR = <>, NEGATOR = =, RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel);
CREATE OPERATOR < (LEFTARG = jq_status, RIGHTARG = jq_status, FUNCTION = jq_status_lt,
    COMMUTATOR = >, NEGATOR = >=, RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel);
CREATE OPERATOR <= (LEFTARG = jq_status, RIGHTARG = jq_status, FUNCTION = jq_status_le,
    COMMUTATOR = >=, NEGATOR = >, RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel);
CREATE OPERATOR > (LEFTARG = jq_status, RIGHTARG = jq_status, FUNCTION = jq_status_gt,
    COMMUTATOR = <, NEGATOR = <=, RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel);
CREATE OPERATOR >= (LEFTARG = jq_status, RIGHTARG = jq_status, FUNCTION = jq_status_ge,
    COMMUTATOR = <=, NEGATOR = <, RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel);

CREATE OPERATOR CLASS jq_status_ops DEFAULT FOR TYPE jq_status USING btree AS
    OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
    FUNCTION 1 (jq_status, jq_status) pg_catalog.enum_cmp(anyenum, anyenum),
    FUNCTION 4 (jq_status, jq_status) pg_catalog.btequalimage(oid);
CREATE OPERATOR CLASS jq_status_hash_ops DEFAULT FOR TYPE jq_status USING hash AS
    OPERATOR 1 =,
    FUNCTION 1 (jq_status, jq_status) pg_catalog.hashenum(anyenum),
    FUNCTION 2 (jq_status, jq_status) pg_catalog.hashenumextended(anyenum, bigint);

SELECT pg_catalog.pg_extension_config_dump('jq_queues', '');
SELECT pg_catalog.pg_extension_config_dump('jq_grants', '');
-- pg_monitor's row is the install's, which the restore's CREATE EXTENSION makes again.
SELECT pg_catalog.pg_extension_config_dump('jq_schema_usage',
    'WHERE role OPERATOR(pg_catalog.<>) ''pg_monitor''::pg_catalog.regrole::pg_catalog.oid');
SELECT pg_catalog.pg_extension_config_dump('jq_key_settings', '');
SELECT pg_catalog.pg_extension_config_dump('jq_schedule_specs', '');
-- A restored database goes on counting its rates' windows.
SELECT pg_catalog.pg_extension_config_dump('jq_rate_counts', '');
SELECT pg_catalog.pg_extension_config_dump('jq_queue_ids', '');
SELECT pg_catalog.pg_extension_config_dump('jq_queue_ids_seq', '');
SELECT pg_catalog.pg_extension_config_dump('jq_live_jobs', '');
-- The day partitions are made after installation, so they are not members of the extension and
-- pg_dump keeps them (and their rows) as it keeps any table; the default partition is a member.
SELECT pg_catalog.pg_extension_config_dump('jq_job_history_default', '');
SELECT pg_catalog.pg_extension_config_dump('jq_jobs_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('jq_job_events', '');
SELECT pg_catalog.pg_extension_config_dump('jq_job_dependencies', '');
SELECT pg_catalog.pg_extension_config_dump('jq_dependency_parts', '');
SELECT pg_catalog.pg_extension_config_dump('jq_job_events_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('jq_token_epochs', '');
