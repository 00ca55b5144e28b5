-- pg_jobqueue 0.3.0 -> 0.4.0: workflows, jobs that wait for other jobs (guide, "Workflows").
-- Run by ALTER EXTENSION pg_jobqueue UPDATE, in one transaction, after the 0.4.0 library is
-- installed; until it commits, the job functions of 0.3.0's definitions answer 55000
-- (src/rights.rs, src/upgrade.rs). Every object it makes is as a fresh install makes it (the
-- upgrade test compares them).
\echo Use "ALTER EXTENSION pg_jobqueue UPDATE" to load this file. \quit

-- Every lock the update needs, taken first, the views before the tables, in the order a reader
-- takes them (a query locks the view it names, then what the view reads; LOCK on a view locks both
-- the same way). Otherwise a reader of jq_queue_stats (the exporter, the dashboard) that came while
-- the tables below were being altered held the view and waited for its tables, and the update,
-- coming to replace the view, became the victim of the deadlock (40P01) after its work.
LOCK TABLE jq_queue_health, jq_queue_stats, jq_managed_jobs, jq_jobs, jq_live_jobs, jq_job_history,
    jq_queue_ids, jq_key_settings IN ACCESS EXCLUSIVE MODE;

-- The jobs: what each depends on, and how many of those it still waits for. The default is a
-- constant, so the columns are added without rewriting the tables.
ALTER TABLE jq_live_jobs
    ADD COLUMN depends_on bigint[],
    ADD COLUMN awaiting int NOT NULL DEFAULT 0;
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
    -- Whether the job's count no longer includes this dependency (sql/schema/tables.sql).
    settled    boolean NOT NULL DEFAULT false,
    CONSTRAINT jq_job_dependencies_pkey PRIMARY KEY (depends_on, job_id)
);
CREATE INDEX jq_job_dependencies_unsettled ON jq_job_dependencies (depends_on) WHERE NOT settled;
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

-- Where the extension's schema is writable (public), another role may have made there what 0.4.0
-- brings under the same names and exact signatures before this update: an operator on jq_status
-- would be picked by every caller's comparison of statuses, and either would stop the update. Each
-- is dropped first, with a warning naming it and its owner; one that something depends on stops
-- the update with PostgreSQL's own error instead (drop it yourself). The extension's objects are
-- never among them: 0.3.0 has none of these.
DO $$
DECLARE
    o record;
BEGIN
    FOR o IN
        SELECT 'OPERATOR' AS kind, p.oid::pg_catalog.regoperator::pg_catalog.text AS name,
               pg_catalog.pg_get_userbyid(p.oprowner) AS owner
        FROM pg_catalog.pg_operator p
        WHERE p.oprnamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
          AND p.oprleft OPERATOR(pg_catalog.=) 'jq_status'::pg_catalog.regtype
          AND p.oprright OPERATOR(pg_catalog.=) 'jq_status'::pg_catalog.regtype
        UNION ALL
        SELECT 'FUNCTION', p.oid::pg_catalog.regprocedure::pg_catalog.text, pg_catalog.pg_get_userbyid(p.proowner)
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
          AND p.proname OPERATOR(pg_catalog.=) ANY (ARRAY['jq_status_eq', 'jq_status_ne', 'jq_status_lt',
              'jq_status_le', 'jq_status_gt', 'jq_status_ge', 'jq_sync_schema_usage']::pg_catalog.name[])
    LOOP
        RAISE WARNING 'pg_jobqueue: dropping % %, owned by %: the update makes its own', o.kind, o.name, o.owner;
        EXECUTE pg_catalog.format('DROP %s %s', o.kind, o.name);
    END LOOP;
END
$$;

-- Exact comparison operators for jq_status, and its default operator classes (guide, "Security").
-- PostgreSQL compares an enum with its polymorphic =(anyenum, anyenum): an exact
-- =(jq_status, jq_status) that another role created in a schema on a caller's search_path would
-- be chosen over it, in the caller's own queries (`WHERE status = 'dead'`). These are those exact
-- signatures, in the extension's schema: no role can create them there again, and one made in a
-- schema later on the path is never chosen. Each is PostgreSQL's own enum comparison (an exact
-- signature needs a function of its own). The indexes keep PostgreSQL's enum operator class, as
-- the extension's own statements name PostgreSQL's operators.
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

REVOKE ALL ON FUNCTION jq_status_eq(jq_status, jq_status), jq_status_ne(jq_status, jq_status),
    jq_status_lt(jq_status, jq_status), jq_status_le(jq_status, jq_status),
    jq_status_gt(jq_status, jq_status), jq_status_ge(jq_status, jq_status) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION jq_status_eq(jq_status, jq_status), jq_status_ne(jq_status, jq_status),
    jq_status_lt(jq_status, jq_status), jq_status_le(jq_status, jq_status),
    jq_status_gt(jq_status, jq_status), jq_status_ge(jq_status, jq_status) TO pg_monitor;

-- USAGE on the extension's schema is taken back (by jq_revoke with a role's last right, and at
-- DROP EXTENSION) only where the extension gave it, as jq_schema_usage records from now on. What
-- 0.3.0 and before gave cannot be told from what the DBA gave (both are the schema owner's grants),
-- so none of it is recorded: it stays, and is the DBA's to take back (guide, "Upgrading").
CREATE TABLE jq_schema_usage (
    role oid PRIMARY KEY
);
-- pg_monitor's row is the install's, which the restore's CREATE EXTENSION makes again.
SELECT pg_catalog.pg_extension_config_dump('jq_schema_usage',
    'WHERE role OPERATOR(pg_catalog.<>) ''pg_monitor''::pg_catalog.regrole::pg_catalog.oid');

CREATE FUNCTION jq_sync_schema_usage(role regrole, wanted boolean) RETURNS void
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    IF wanted THEN
        IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n, pg_catalog.aclexplode(n.nspacl) a
                       WHERE n.oid OPERATOR(pg_catalog.=) '@extschema@'::regnamespace::oid
                         AND a.grantee OPERATOR(pg_catalog.=) jq_sync_schema_usage.role::oid
                         AND a.privilege_type OPERATOR(pg_catalog.=) 'USAGE') THEN
            EXECUTE pg_catalog.format('GRANT USAGE ON SCHEMA %s TO %s', '@extschema@'::regnamespace, role);
            INSERT INTO jq_schema_usage (role) VALUES (jq_sync_schema_usage.role::oid) ON CONFLICT DO NOTHING;
        END IF;
    ELSE
        DELETE FROM jq_schema_usage u WHERE u.role OPERATOR(pg_catalog.=) jq_sync_schema_usage.role::oid;
        IF FOUND THEN
            EXECUTE pg_catalog.format('REVOKE USAGE ON SCHEMA %s FROM %s', '@extschema@'::regnamespace, role);
        END IF;
    END IF;
END
$$;

REVOKE ALL ON FUNCTION jq_sync_schema_usage(regrole, boolean) FROM PUBLIC;

CREATE OR REPLACE FUNCTION jq_sync_function_rights(role regrole) RETURNS void
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
    PERFORM jq_sync_schema_usage(role, holds_any);
    IF holds_any THEN
        EXECUTE pg_catalog.format('GRANT SELECT ON jq_queue_stats, jq_queue_health, jq_maintenance TO %s', role);
    ELSE
        EXECUTE pg_catalog.format('REVOKE SELECT ON jq_queue_stats, jq_queue_health, jq_maintenance FROM %s', role);
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
           -- A job's inputs (guide, "Workflows"): for whoever may read its results.
           ('enqueue', 'jq_parent_results'), ('consume', 'jq_parent_results'), ('manage', 'jq_parent_results'),
           -- The comparisons of jq_status, behind its operators (guide, "Security").
           ('any', 'jq_status_eq'), ('any', 'jq_status_ne'), ('any', 'jq_status_lt'),
           ('any', 'jq_status_le'), ('any', 'jq_status_gt'), ('any', 'jq_status_ge')
$$;

SELECT jq_sync_function_rights(r.role) FROM (SELECT DISTINCT g.role FROM jq_grants g) AS r;

-- DROP EXTENSION's event trigger: a PL/pgSQL function that calls the library and lets by only
-- its missing file (58P01), so that DROP EXTENSION, of this extension and of every other in the
-- database, works once the library's file is gone (guide, "Uninstall"); and the library notes at
-- the start what to take back, and takes it back as the extension itself is dropped
-- (src/api/rights.rs). The event trigger calls the function by its oid, which stays.
CREATE  FUNCTION "jq_extension_drop_starting"() RETURNS void
STRICT VOLATILE
SET search_path TO pg_catalog, @extschema@, pg_temp
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'jq_extension_drop_starting_wrapper';
REVOKE ALL ON FUNCTION jq_extension_drop_starting() FROM PUBLIC;
CREATE OR REPLACE FUNCTION jq_extension_dropped() RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension e
               WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'
                 AND pg_catalog.pg_has_role(e.extowner, 'USAGE')) THEN
        PERFORM jq_extension_drop_starting();
    END IF;
EXCEPTION WHEN undefined_file THEN
    NULL;
END
$$;

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
