-- pg_jobqueue 0.2.0 -> 0.3.0: safe to deploy (README, "Security").
-- Every function pins pg_catalog first in its search_path; the functions run with the owner's
-- rights after checking the caller's per-queue right (jq_grants, jq_grant, jq_revoke); nothing is
-- executable by PUBLIC; the figures views show each role only the queues it may see; queue settings
-- are bounded (jq_setting_interval_ok) and changed through jq_configure; backoff is computed so
-- that it cannot overflow (jq_backoff_delay). Roles that used the tables directly under 0.2.0 keep
-- what they could do, as rights on every queue, and lose the table rights. Storage is split into a
-- hot table and a partitioned history (README, "Storage"). Jobs and leases stay.
\echo Use "ALTER EXTENSION pg_jobqueue UPDATE TO '0.3.0'" to load this file. \quit

-- Rights per queue (README, "Security"): a role holds `privilege` on every queue named `queue`, or,
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

-- The functions that are new in 0.3.0.
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

CREATE  FUNCTION "jq_setting_interval_ok"(
	"value" interval /* Interval */
) RETURNS bool /* bool */
IMMUTABLE STRICT PARALLEL SAFE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_setting_interval_ok_wrapper';


CREATE FUNCTION "jq_grants_changed"()
	RETURNS TRIGGER
	LANGUAGE c
	AS 'MODULE_PATHNAME', 'jq_grants_changed_wrapper';


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

-- jq_jobs checks its invariants in one constraint instead of three (see sql/schema/tables.sql).
ALTER TABLE jq_jobs
    DROP CONSTRAINT jq_jobs_max_attempts_positive,
    DROP CONSTRAINT jq_jobs_attempts_within_budget,
    DROP CONSTRAINT jq_jobs_lease_only_while_running,
    ADD CONSTRAINT jq_jobs_consistent CHECK (
        max_attempts >= 1
        AND attempt_count BETWEEN 0 AND max_attempts
        AND (status = 'running') = (lease_owner IS NOT NULL)
        AND (status = 'running') = (lease_expires_at IS NOT NULL));

-- `notify` may now be NULL, the new default: NOTIFY while someone listens, which only a preloaded
-- library can tell, so without preload never (README, "Wake-ups"). Under 0.2.0, on meant just that
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
    SELECT j.queue_name,
           pg_catalog.count(*) FILTER (WHERE j.available_at <= c.now) AS pending,
           pg_catalog.count(*) FILTER (WHERE j.available_at > c.now) AS scheduled,
           pg_catalog.min(j.available_at) FILTER (WHERE j.available_at <= c.now) AS oldest_claimable
    FROM jq_jobs j, clock c WHERE j.status OPERATOR(pg_catalog.=) 'pending' GROUP BY j.queue_name
), running AS (
    SELECT j.queue_name,
           pg_catalog.count(*) AS running,
           pg_catalog.count(*) FILTER (WHERE j.lease_expires_at <= c.now + interval '10 seconds') AS expiring
    FROM jq_jobs j, clock c WHERE j.status OPERATOR(pg_catalog.=) 'running' GROUP BY j.queue_name
), unresolved AS (
    SELECT j.queue_name,
           pg_catalog.count(*) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'dead') AS dead,
           pg_catalog.count(*) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'cancelled') AS cancelled,
           pg_catalog.min(j.finished_at) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'dead') AS oldest_dead
    FROM jq_jobs j WHERE j.status OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'cancelled']::jq_status[]) GROUP BY j.queue_name
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
LEFT JOIN unresolved u USING (queue_name)
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

-- The jobs, and their events, of the queues the caller may manage: what an operator reads to decide
-- on a re-drive or a cancel, without a right on the tables (README, "Security").
CREATE VIEW jq_managed_jobs WITH (security_barrier) AS
SELECT j.* FROM jq_jobs j WHERE jq_has_right(j.queue_name, 'manage');

CREATE VIEW jq_managed_job_events WITH (security_barrier) AS
SELECT e.* FROM jq_job_events e WHERE jq_has_right(e.queue_name, 'manage');

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

-- Rights (README, "Security"). The jq_* functions are the only door: no role but the owner has a
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

-- Tell every session to forget its cached rights when jq_grants changes (rights.rs). Its path is
-- pinned like every other function's.
ALTER FUNCTION jq_grants_changed() SET search_path = pg_catalog, @extschema@, pg_temp;
CREATE TRIGGER jq_grants_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jq_grants
    FOR EACH STATEMENT EXECUTE FUNCTION jq_grants_changed();

-- Which functions each privilege calls; 'any' for those every holder of a right may call (the
-- figures of the queues it may see).
CREATE FUNCTION jq_privilege_functions() RETURNS TABLE (privilege text, function_name name)
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
    VALUES ('enqueue', 'jq_enqueue'::name), ('enqueue', 'jq_enqueue_batch'),
           ('consume', 'jq_claim'), ('consume', 'jq_heartbeat'), ('consume', 'jq_complete'),
           ('consume', 'jq_complete_batch'), ('consume', 'jq_fail'),
           ('manage', 'jq_retry'), ('manage', 'jq_cancel'), ('manage', 'jq_retry_dead'),
           ('manage', 'jq_purge_dead'), ('manage', 'jq_configure'),
           ('any', 'jq_can_see'), ('any', 'jq_has_right'), ('any', 'jq_queue_counters'),
           ('any', 'jq_failure_counts'), ('any', 'jq_metrics')
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
        SELECT p.oid::regprocedure AS signature,
               -- pg_monitor keeps the figures it was given at install, whatever it is granted or not.
               CASE WHEN m.privilege OPERATOR(pg_catalog.=) 'any' THEN holds_any
                    ELSE EXISTS (SELECT 1 FROM jq_grants g
                                 WHERE g.role::oid OPERATOR(pg_catalog.=) jq_sync_function_rights.role::oid
                                   AND g.privilege OPERATOR(pg_catalog.=) m.privilege) END AS wanted
        FROM jq_privilege_functions() m
        JOIN pg_catalog.pg_proc p ON p.proname OPERATOR(pg_catalog.=) m.function_name
                                 AND p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::regnamespace
    LOOP
        IF f.wanted THEN
            EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s', f.signature, role);
        ELSE
            EXECUTE pg_catalog.format('REVOKE EXECUTE ON FUNCTION %s FROM %s', f.signature, role);
        END IF;
    END LOOP;
    IF holds_any THEN
        EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %s TO %s', '@extschema@'::regnamespace, role);
        EXECUTE pg_catalog.format('GRANT SELECT ON jq_queue_stats, jq_queue_health TO %s', role);
    ELSE
        EXECUTE pg_catalog.format('REVOKE SELECT ON jq_queue_stats, jq_queue_health FROM %s', role);
    END IF;
    IF EXISTS (SELECT 1 FROM jq_grants g
               WHERE g.role::oid OPERATOR(pg_catalog.=) jq_sync_function_rights.role::oid
                 AND g.privilege OPERATOR(pg_catalog.=) 'manage') THEN
        EXECUTE pg_catalog.format('GRANT SELECT ON jq_managed_jobs, jq_managed_job_events TO %s', role);
    ELSE
        EXECUTE pg_catalog.format('REVOKE SELECT ON jq_managed_jobs, jq_managed_job_events FROM %s', role);
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

-- Monitoring: members of the built-in pg_monitor role read every queue's figures (the views,
-- jq_metrics and the counters) and gain nothing else.
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT SELECT ON jq_queue_stats, jq_queue_health TO pg_monitor;
GRANT EXECUTE ON FUNCTION jq_can_see(text), jq_metrics(), jq_queue_counters(), jq_failure_counts()
    TO pg_monitor;

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
    FROM (VALUES ('jq_jobs', 'INSERT', 'enqueue'), ('jq_jobs', 'UPDATE', 'consume'),
                 ('jq_queues', 'UPDATE', 'manage'), ('jq_jobs', 'SELECT', 'monitor')) AS m(relation, right_name, privilege)
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
        WHERE c.oid OPERATOR(pg_catalog.=) ANY (ARRAY[pg_catalog.to_regclass('jq_jobs'), pg_catalog.to_regclass('jq_queues'),
                                                 pg_catalog.to_regclass('jq_job_events'), pg_catalog.to_regclass('jq_jobs_id_seq'),
                                                 pg_catalog.to_regclass('jq_job_events_id_seq')]::oid[])
          AND a.grantee OPERATOR(pg_catalog.<>) c.relowner
    LOOP
        target := CASE WHEN grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC' ELSE grantee::regrole::text END;
        EXECUTE pg_catalog.format('REVOKE ALL ON jq_jobs, jq_queues, jq_job_events FROM %s', target);
        EXECUTE pg_catalog.format('REVOKE ALL ON SEQUENCE jq_jobs_id_seq, jq_job_events_id_seq FROM %s', target);
        IF grantee OPERATOR(pg_catalog.<>) 0 THEN
            PERFORM jq_sync_function_rights(grantee::regrole);
        END IF;
    END LOOP;
END
$$;

-- Storage split (README, "Storage"): the table of 0.2.0 becomes the hot table, keeping every live,
-- dead and cancelled job where it is (so running jobs keep their rows, leases and tokens), and its
-- succeeded jobs move to the new history, into its default partition: the day partitions are made
-- after installation (src/api/retention.rs), so that they do not belong to the extension. jq_prune
-- deletes those moved rows one by one when their retention ends. A database with much history has
-- many dead rows in jq_live_jobs after this; autovacuum removes them, or run VACUUM jq_live_jobs.
-- Events lose their foreign key: a job is now in one of two tables.
ALTER TABLE jq_job_events DROP CONSTRAINT jq_job_events_job_id_fkey;
ALTER TABLE jq_jobs RENAME TO jq_live_jobs;
DROP INDEX jq_jobs_finished;

CREATE TABLE jq_job_history (
    id                 bigint NOT NULL,
    queue_name         text NOT NULL,
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
    finished_at        timestamptz NOT NULL
) PARTITION BY RANGE (finished_at);
CREATE TABLE jq_job_history_default PARTITION OF jq_job_history DEFAULT;
CREATE INDEX jq_job_history_default_id ON jq_job_history_default (id);
CREATE INDEX jq_job_history_default_queue ON jq_job_history_default (queue_name, finished_at);
SELECT pg_catalog.pg_extension_config_dump('jq_job_history_default', '');

WITH moved AS (
    DELETE FROM jq_live_jobs j WHERE j.status OPERATOR(pg_catalog.=) 'succeeded'
    RETURNING j.*
)
INSERT INTO jq_job_history
SELECT m.id, m.queue_name, m.payload, m.priority, m.available_at, m.attempt_count, m.max_attempts,
       m.lease_token, m.lease_length, m.claimed_at, m.run_deadline, m.last_error_code,
       m.last_error_message, m.dedup_key, m.ordering_key, m.created_at, m.finished_at
FROM moved m;

CREATE VIEW jq_jobs AS
SELECT id, queue_name, payload, status, priority, available_at, attempt_count, max_attempts,
       lease_owner, lease_token, lease_expires_at, lease_length, claimed_at, run_deadline,
       last_error_code, last_error_message, dedup_key, ordering_key, created_at, finished_at
FROM jq_live_jobs
UNION ALL
SELECT id, queue_name, payload, 'succeeded'::jq_status, priority, available_at, attempt_count,
       max_attempts, NULL::text, lease_token, NULL::timestamptz, lease_length, claimed_at,
       run_deadline, last_error_code, last_error_message, dedup_key, ordering_key, created_at,
       finished_at
FROM jq_job_history;

-- Followed the rename to the hot table; it shows every job again.
CREATE OR REPLACE VIEW jq_managed_jobs WITH (security_barrier) AS
SELECT j.* FROM jq_jobs j WHERE jq_has_right(j.queue_name, 'manage');
