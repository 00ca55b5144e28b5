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
    -- Whether committed enqueues send NOTIFY "jq_<queue_name>" (LISTEN wake-ups). A session reads
    -- it at most once a second, so a change reaches every session within a second.
    notify        boolean NOT NULL DEFAULT true,
    -- jq_queue_health warns when a figure passes its threshold; NULL: never.
    warn_claimable_age   interval DEFAULT '5 minutes'
                  CONSTRAINT jq_queues_warn_claimable_age_positive CHECK (warn_claimable_age > interval '0'),
    warn_expiring_leases int DEFAULT 10
                  CONSTRAINT jq_queues_warn_expiring_leases_positive CHECK (warn_expiring_leases >= 1),
    warn_dead_age        interval DEFAULT '1 hour'
                  CONSTRAINT jq_queues_warn_dead_age_not_negative CHECK (warn_dead_age >= interval '0'),
    CONSTRAINT jq_queues_backoff_cap_ge_base CHECK (backoff_cap >= backoff_base)
);

-- A plain sequence rather than an identity column: pg_dump can then keep its position through
-- pg_extension_config_dump, so a restored queue never reuses a job id.
CREATE SEQUENCE jq_jobs_id_seq;

CREATE TABLE jq_jobs (
    id               bigint PRIMARY KEY DEFAULT nextval('jq_jobs_id_seq'),
    queue_name       text NOT NULL,
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
    created_at       timestamptz NOT NULL,
    finished_at      timestamptz,
    CONSTRAINT jq_jobs_max_attempts_positive CHECK (max_attempts >= 1),
    -- Guarantee 4 enforced by the table itself, whatever code path changes a row.
    CONSTRAINT jq_jobs_attempts_within_budget CHECK (attempt_count BETWEEN 0 AND max_attempts),
    -- A lease exists exactly while the job runs.
    CONSTRAINT jq_jobs_lease_only_while_running CHECK (
        (status = 'running') = (lease_owner IS NOT NULL)
        AND (status = 'running') = (lease_expires_at IS NOT NULL))
);

-- The claim index: only pending rows, keyed in the claim's own order after the queue. A claim walks
-- it from the front and stops after batch_size rows: it never sorts and never sees finished rows,
-- however much history the table keeps.
CREATE INDEX jq_jobs_claim ON jq_jobs (queue_name, priority DESC, available_at, id)
    WHERE status = 'pending';

-- The same pending rows in arrival order, for fairness: the claim's first step asks whether any job
-- has waited past the queue's starvation_limit, which the priority-ordered index cannot answer
-- without reading every higher-priority entry first.
CREATE INDEX jq_jobs_fifo ON jq_jobs (queue_name, available_at, id) WHERE status = 'pending';

-- Running rows, for the reaper and per-queue running counts. Deliberately not keyed on
-- lease_expires_at: a heartbeat changes only that column, so it stays a HOT update (no index
-- insertions, and the old version is pruned on the page).
CREATE INDEX jq_jobs_running ON jq_jobs (queue_name) WHERE status = 'running';

-- Dead and cancelled jobs, for the stats view and operators (oldest dead job, re-drive by queue),
-- without reading succeeded history.
CREATE INDEX jq_jobs_unresolved ON jq_jobs (queue_name, status, finished_at)
    WHERE status IN ('dead', 'cancelled');

-- Finished jobs that retention deletes, oldest first. Dead jobs are not in it: they are kept.
CREATE INDEX jq_jobs_finished ON jq_jobs (finished_at) WHERE status IN ('succeeded', 'cancelled');

-- Dedup keys: unique among live jobs only, so a finished job frees its key. Enqueue relies on
-- ON CONFLICT against this index, which is race-free where a read-then-insert is not.
CREATE UNIQUE INDEX jq_jobs_dedup ON jq_jobs (queue_name, dedup_key)
    WHERE dedup_key IS NOT NULL AND status IN ('pending', 'running');

-- Ordering keys: the claim asks "is an earlier job of this key still live, or another one running?".
CREATE INDEX jq_jobs_ordering ON jq_jobs (queue_name, ordering_key, id)
    WHERE ordering_key IS NOT NULL AND status IN ('pending', 'running');

-- Every job is inserted once and updated at least twice (claim, then complete or fail), so dead
-- tuples pile up at the rate of the queue's throughput. Vacuum on a fixed small count rather than a
-- fraction of the table (a large succeeded history would otherwise postpone it for hours and let the
-- claim index bloat), and leave 30% of each page free so heartbeat updates find room for HOT.
ALTER TABLE jq_jobs SET (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.0,
    autovacuum_vacuum_threshold = 5000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05
);

CREATE SEQUENCE jq_job_events_id_seq;

-- The audit trail: one row per failure, lease expiry, re-drive and cancellation. `status` is the job's
-- status after the event, so a death is an event whose status is 'dead'. The happy path (claim,
-- heartbeat, complete) writes nothing here.
CREATE TABLE jq_job_events (
    id            bigint PRIMARY KEY DEFAULT nextval('jq_job_events_id_seq'),
    job_id        bigint NOT NULL REFERENCES jq_jobs (id) ON DELETE CASCADE,
    queue_name    text NOT NULL,
    event         text NOT NULL
                  CONSTRAINT jq_job_events_event_known
                  CHECK (event IN ('failed', 'lease_expired', 'retried', 'cancelled')),
    status        jq_status NOT NULL,
    at            timestamptz NOT NULL,
    attempt       int NOT NULL,
    worker        text,
    lease_token   bigint NOT NULL,
    error_code    text,
    error_message text
);

-- A job's history in order, and the foreign key's cascade on job deletion.
CREATE INDEX jq_job_events_job ON jq_job_events (job_id, id);

-- Events are append-only: plain insert-driven vacuum is enough.

SELECT pg_catalog.pg_extension_config_dump('jq_queues', '');
SELECT pg_catalog.pg_extension_config_dump('jq_jobs', '');
SELECT pg_catalog.pg_extension_config_dump('jq_jobs_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('jq_job_events', '');
SELECT pg_catalog.pg_extension_config_dump('jq_job_events_id_seq', '');

-- Retry delay after `attempt` failed attempts: exponential from the queue's backoff_base, capped at
-- backoff_cap, with "equal jitter" (a uniform draw from the upper half), so that a burst of failures
-- spreads out yet a retry never comes sooner than half the nominal delay.
CREATE FUNCTION jq_backoff(queue_name text, attempt int) RETURNS interval
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = @extschema@, pg_catalog, pg_temp
AS $$
    SELECT least(s.cap, s.base * power(2, least(greatest(attempt, 1) - 1, 40)))
           * (0.5 + random() * 0.5)
    FROM (SELECT coalesce(q.backoff_base, interval '1 second') AS base,
                 coalesce(q.backoff_cap, interval '1 hour') AS cap
          FROM (VALUES (1)) AS one
          LEFT JOIN jq_queues q ON q.queue_name = jq_backoff.queue_name) AS s
$$;

-- One row per queue that has a settings row or any live, dead or cancelled job. Each part reads one
-- partial index, so the cost grows with live and unresolved jobs, not with succeeded history. The
-- clock is read once, and it is the clock the claim uses: "pending" means what jq_claim would take.
CREATE VIEW jq_queue_stats AS
WITH clock AS MATERIALIZED (
    SELECT clock_timestamp() AS now
), pending AS (
    SELECT j.queue_name,
           count(*) FILTER (WHERE j.available_at <= c.now) AS pending,
           count(*) FILTER (WHERE j.available_at > c.now) AS scheduled,
           min(j.available_at) FILTER (WHERE j.available_at <= c.now) AS oldest_claimable
    FROM jq_jobs j, clock c WHERE j.status = 'pending' GROUP BY j.queue_name
), running AS (
    SELECT j.queue_name,
           count(*) AS running,
           count(*) FILTER (WHERE j.lease_expires_at <= c.now + interval '10 seconds') AS expiring
    FROM jq_jobs j, clock c WHERE j.status = 'running' GROUP BY j.queue_name
), unresolved AS (
    SELECT j.queue_name,
           count(*) FILTER (WHERE j.status = 'dead') AS dead,
           count(*) FILTER (WHERE j.status = 'cancelled') AS cancelled,
           min(j.finished_at) FILTER (WHERE j.status = 'dead') AS oldest_dead
    FROM jq_jobs j WHERE j.status IN ('dead', 'cancelled') GROUP BY j.queue_name
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
       c.now - u.oldest_dead      AS oldest_dead_age
FROM queues q
CROSS JOIN clock c
LEFT JOIN pending p USING (queue_name)
LEFT JOIN running r USING (queue_name)
LEFT JOIN unresolved u USING (queue_name);

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
