-- pg_jobqueue 0.3.0 -> 0.4.0: workflows, jobs that wait for other jobs (guide, "Workflows").
-- Run by ALTER EXTENSION pg_jobqueue UPDATE, in one transaction, after the 0.4.0 library is
-- installed; until it commits, the job functions of 0.3.0's definitions answer 55000
-- (src/rights.rs, src/upgrade.rs). Every object it makes is as a fresh install makes it (the
-- upgrade test compares them).
\echo Use "ALTER EXTENSION pg_jobqueue UPDATE" to load this file. \quit

-- The jobs: what each depends on, how many of those it still waits for, and whether others wait for
-- it. The defaults are constants, so the columns are added without rewriting the tables.
ALTER TABLE jq_live_jobs
    ADD COLUMN depends_on bigint[],
    ADD COLUMN awaiting int NOT NULL DEFAULT 0,
    ADD COLUMN dependents boolean NOT NULL DEFAULT false;
ALTER TABLE jq_job_history ADD COLUMN depends_on bigint[];

-- Whether a queue has had a job of a priority other than 0 (src/api/settings.rs): until then its
-- claims walk one priority (sql/queries/claim.sql). From the jobs that may still be claimed or
-- re-driven; an enqueue sets it from now on. The UPDATE's trigger tells every session to read the
-- settings again.
ALTER TABLE jq_queue_ids ADD COLUMN priorities boolean NOT NULL DEFAULT false;
UPDATE jq_queue_ids n SET priorities = true
WHERE EXISTS (SELECT 1 FROM jq_live_jobs j WHERE j.queue_id = n.queue_id AND j.priority <> 0);

-- Held jobs are in neither claim index. Every job of 0.3.0 waits for nothing, so the new claim
-- indexes hold what the old ones held; they are built before the old ones go, so that claims of
-- other sessions, which wait for this transaction's lock on the table, plan onto them at once.
ALTER INDEX jq_live_jobs_claim RENAME TO jq_live_jobs_claim_0_3_0;
ALTER INDEX jq_live_jobs_key_claim RENAME TO jq_live_jobs_key_claim_0_3_0;
CREATE INDEX jq_live_jobs_claim ON jq_live_jobs (queue_id, priority DESC, available_at, id)
    WHERE status OPERATOR(pg_catalog.=) 'pending' AND awaiting = 0 AND concurrency_key IS NULL;
CREATE INDEX jq_live_jobs_key_claim ON jq_live_jobs (queue_id, concurrency_key, priority DESC, available_at, id)
    WHERE status OPERATOR(pg_catalog.=) 'pending' AND awaiting = 0 AND concurrency_key IS NOT NULL;
DROP INDEX jq_live_jobs_claim_0_3_0;
DROP INDEX jq_live_jobs_key_claim_0_3_0;
CREATE INDEX jq_live_jobs_held ON jq_live_jobs (queue_id)
    WHERE status OPERATOR(pg_catalog.=) 'pending' AND awaiting > 0;

CREATE TABLE jq_job_dependencies (
    depends_on bigint NOT NULL,
    job_id     bigint NOT NULL,
    -- Whether the job counts its dependencies in parts (jq_dependency_parts): what a completion
    -- of the dependency counts down, read with the row that finds the job.
    parted     boolean NOT NULL DEFAULT false,
    CONSTRAINT jq_job_dependencies_pkey PRIMARY KEY (depends_on, job_id)
);
SELECT pg_catalog.pg_extension_config_dump('jq_job_dependencies', '');
CREATE TABLE jq_dependency_parts (
    job_id   bigint NOT NULL,
    part     int NOT NULL,
    awaiting int NOT NULL,
    CONSTRAINT jq_dependency_parts_pkey PRIMARY KEY (job_id, part)
);
SELECT pg_catalog.pg_extension_config_dump('jq_dependency_parts', '');

-- A keyed claim looks up a key's own limit only in a queue that has rows in jq_key_settings, which
-- each session keeps with the queue's settings (src/api/settings.rs): a change of the table tells
-- every session to read them again, as jq_queues' does.
CREATE TRIGGER jq_settings_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jq_key_settings
    FOR EACH STATEMENT EXECUTE FUNCTION jq_table_changed();

-- The views, with the new columns at their ends.
CREATE OR REPLACE VIEW jq_jobs AS
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
JOIN jq_queue_ids q ON q.queue_id = h.queue_id;;

CREATE OR REPLACE VIEW jq_managed_jobs WITH (security_barrier) AS
SELECT j.* FROM jq_jobs j WHERE jq_has_right(j.queue_name, 'manage');;

CREATE OR REPLACE VIEW jq_queue_stats WITH (security_barrier) AS
WITH clock AS MATERIALIZED (
    SELECT pg_catalog.clock_timestamp() AS now
), pending AS (
    SELECT n.queue_name,
           pg_catalog.count(*) FILTER (WHERE j.awaiting = 0 AND j.available_at <= c.now) AS pending,
           pg_catalog.count(*) FILTER (WHERE j.awaiting = 0 AND j.available_at > c.now) AS scheduled,
           pg_catalog.min(j.available_at) FILTER (WHERE j.awaiting = 0 AND j.available_at <= c.now) AS oldest_claimable,
           -- Held until their dependencies succeed (guide, "Workflows"), neither pending nor scheduled.
           pg_catalog.count(*) FILTER (WHERE j.awaiting > 0) AS held_by_dependency
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
        WHERE j.status OPERATOR(pg_catalog.=) 'pending' AND j.awaiting = 0 AND j.concurrency_key IS NOT NULL AND j.available_at <= c.now
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
       CASE WHEN s.paused THEN coalesce(p.pending, 0) ELSE 0 END AS held_by_pause,
       coalesce(p.held_by_dependency, 0) AS held_by_dependency
FROM queues q
CROSS JOIN clock c
LEFT JOIN pending p USING (queue_name)
LEFT JOIN running r USING (queue_name)
LEFT JOIN unresolved u USING (queue_name)
LEFT JOIN held h USING (queue_name)
LEFT JOIN jq_queues s USING (queue_name)
WHERE jq_can_see(q.queue_name);;

-- jq_enqueue and jq_enqueue_batch take `depends_on` last, and call new C symbols: 0.3.0's
-- definitions are dropped with their argument lists (a CREATE OR REPLACE would add an overload).
DROP FUNCTION jq_enqueue(text, jsonb, int, timestamptz, int, text, text, text, timestamptz);
DROP FUNCTION jq_enqueue_batch(text, jsonb[], int, timestamptz, int, text, timestamptz);
CREATE  FUNCTION "jq_enqueue"(
	"queue_name" TEXT, /* Option < & str > */
	"payload" jsonb, /* Option < Payload > */
	"priority" INT DEFAULT 0, /* Option < i32 > */
	"run_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"max_attempts" INT DEFAULT NULL, /* Option < i32 > */
	"dedup_key" TEXT DEFAULT NULL, /* Option < & str > */
	"ordering_key" TEXT DEFAULT NULL, /* Option < & str > */
	"concurrency_key" TEXT DEFAULT NULL, /* Option < & str > */
	"expires_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"depends_on" bigint[] DEFAULT NULL /* :: std :: option :: Option < Vec < Option < i64 > > > */
) RETURNS bigint /* spi :: Result < i64 > */
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_enqueue_one_wrapper';

CREATE  FUNCTION "jq_enqueue_batch"(
	"queue_name" TEXT, /* Option < & str > */
	"payloads" jsonb[], /* :: std :: option :: Option < Vec < Option < Payload > > > */
	"priority" INT DEFAULT 0, /* Option < i32 > */
	"run_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"max_attempts" INT DEFAULT NULL, /* Option < i32 > */
	"concurrency_key" TEXT DEFAULT NULL, /* Option < & str > */
	"expires_at" timestamp with time zone DEFAULT NULL, /* Option < TimestampWithTimeZone > */
	"depends_on" bigint[] DEFAULT NULL /* :: std :: option :: Option < Vec < Option < i64 > > > */
) RETURNS SETOF bigint /* i64 */
VOLATILE PARALLEL UNSAFE 
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_enqueue_many_wrapper';

CREATE  FUNCTION "jq_parent_results"(
	"job_id" bigint /* Option < i64 > */
) RETURNS TABLE (
	"job_id" bigint,  /* i64 */
	"status" jq_status,  /* Status */
	"result" jsonb  /* Option < Payload > */
)
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_parent_results_wrapper';

CREATE  FUNCTION "jq_purge"(
	"job_id" bigint /* Option < i64 > */
) RETURNS bool /* spi :: Result < bool > */
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_purge_wrapper';

CREATE  FUNCTION "jq_list_jobs"(
	"queue_name" TEXT, /* Option < & str > */
	"status" jq_status DEFAULT NULL, /* Option < Status > */
	"key" TEXT DEFAULT NULL, /* Option < & str > */
	"error_code" TEXT DEFAULT NULL, /* Option < & str > */
	"older_than" interval DEFAULT NULL, /* Option < Interval > */
	"max_rows" INT DEFAULT 50, /* Option < i32 > */
	"skip_rows" INT DEFAULT 0 /* Option < i32 > */
) RETURNS TABLE (
	"id" bigint,  /* i64 */
	"status" jq_status,  /* Status */
	"priority" INT,  /* i32 */
	"attempt_count" INT,  /* i32 */
	"max_attempts" INT,  /* i32 */
	"created_at" timestamp with time zone,  /* TimestampWithTimeZone */
	"available_at" timestamp with time zone,  /* TimestampWithTimeZone */
	"finished_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_error_code" TEXT,  /* Option < String > */
	"concurrency_key" TEXT,  /* Option < String > */
	"ordering_key" TEXT,  /* Option < String > */
	"lease_owner" TEXT,  /* Option < String > */
	"held" bool  /* bool */
)
VOLATILE PARALLEL UNSAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_list_jobs_wrapper';

REVOKE ALL ON FUNCTION jq_enqueue(text, jsonb, int, timestamptz, int, text, text, text, timestamptz, bigint[]),
    jq_enqueue_batch(text, jsonb[], int, timestamptz, int, text, timestamptz, bigint[]),
    jq_parent_results(bigint), jq_purge(bigint),
    jq_list_jobs(text, jq_status, text, text, interval, int, int) FROM PUBLIC;

-- Which functions each privilege calls: jq_parent_results for every right, jq_purge and jq_list_jobs
-- for manage.
-- Then every role with a right gets EXECUTE on the new functions as jq_grant would give it.
CREATE OR REPLACE FUNCTION jq_privilege_functions() RETURNS TABLE (privilege text, function_name name)
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
           ('manage', 'jq_purge_dead'), ('manage', 'jq_purge'), ('manage', 'jq_configure'),
           ('manage', 'jq_list_jobs'),
           ('manage', 'jq_configure_key'),
           ('manage', 'jq_schedule'), ('manage', 'jq_unschedule'), ('manage', 'jq_pause_schedule'),
           ('manage', 'jq_resume_schedule'), ('any', 'jq_cron_next'),
           ('any', 'jq_can_see'), ('any', 'jq_has_right'), ('any', 'jq_queue_counters'),
           ('any', 'jq_failure_counts'), ('any', 'jq_metrics'), ('any', 'jq_maintenance_status'),
           -- A job's inputs (guide, "Workflows"): for whoever may see the job's queue.
           ('any', 'jq_parent_results')
$$;

SELECT jq_sync_function_rights(r.role) FROM (SELECT DISTINCT g.role FROM jq_grants g) AS r;

-- PostgreSQL records what each GRANT of an extension script leaves as the object's initial
-- privileges (pg_init_privs), and pg_dump leaves those out as the extension's own: the rights just
-- given again to the roles of jq_grants (and those 0.2.0 -> 0.3.0 gave) would be lost by a dump and
-- restore, which makes the extension afresh, and each such role would be refused every function.
-- A fresh install's initial privileges are the owner's and pg_monitor's alone (the upgrade test
-- compares them), so the roles of jq_grants are taken out of them; their rights stay granted, and
-- are dumped as jq_grant's are.
UPDATE pg_catalog.pg_init_privs i
SET initprivs = ARRAY(
        SELECT u.item FROM pg_catalog.unnest(i.initprivs) WITH ORDINALITY AS u(item, n)
        WHERE NOT EXISTS (
            SELECT FROM pg_catalog.aclexplode(ARRAY[u.item]) a
            JOIN jq_grants g ON g.role::oid OPERATOR(pg_catalog.=) a.grantee
            WHERE a.grantee OPERATOR(pg_catalog.<>) a.grantor
              AND a.grantee OPERATOR(pg_catalog.<>) 'pg_monitor'::regrole::oid)
        ORDER BY u.n)
FROM pg_catalog.pg_depend d
JOIN pg_catalog.pg_extension e ON e.oid OPERATOR(pg_catalog.=) d.refobjid
WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
  AND d.deptype OPERATOR(pg_catalog.=) 'e'
  AND e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'
  AND i.classoid OPERATOR(pg_catalog.=) d.classid
  AND i.objoid OPERATOR(pg_catalog.=) d.objid
  AND i.privtype OPERATOR(pg_catalog.=) 'e';

-- Tell every session to read the extension's version again (src/rights.rs): jq_grants' statement
-- trigger sends the invalidation, and no row changes.
DELETE FROM jq_grants WHERE false;
