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

-- USAGE on the schema is jq_grant's to give with a role's first right and jq_revoke's to take back
-- with its last (guide, "Security"), and the event trigger below takes it back when the extension
-- is dropped; but only where the extension gave it: a role that already held USAGE there of its
-- own (granted by the DBA) is given nothing, so nothing is taken from it. jq_schema_usage records
-- what was given.
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
                       jq_sync_schema_usage(regrole, boolean),
                       jq_check_grant_arguments(regrole, text, text),
                       jq_grant(regrole, text, text), jq_revoke(regrole, text, text) FROM PUBLIC;

-- The schema outlives the extension (one the DBA made for it, or public): at DROP EXTENSION, take
-- back the USAGE on it that jq_grant gave and pg_monitor got below, as jq_schema_usage records
-- them. An event trigger at the start of every DROP EXTENSION: jq_extension_drop_starting notes
-- what to take back, and takes it back as PostgreSQL drops pg_jobqueue itself, if it is among the
-- extensions dropped (src/api/rights.rs). The trigger's function is PL/pgSQL, not the library's,
-- so that it runs once the library's file is gone (the packages removed before the extension,
-- guide "Uninstall"): the call then fails with 58P01 (undefined_file), and that error alone is
-- let by, so that DROP EXTENSION of this extension and of every other in the database still
-- works. Nothing can be taken back then, and the USAGE stays: the guide says how to take it back.
-- It fires for every role's DROP EXTENSION, of any extension that role may drop (a trusted one it
-- created). Only a role with the owner's rights (or a superuser) may drop pg_jobqueue, and only
-- it may call jq_extension_drop_starting: for any other, there is nothing to note, and its drop
-- goes on.
CREATE FUNCTION jq_extension_dropped() RETURNS event_trigger
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
REVOKE ALL ON FUNCTION jq_extension_dropped() FROM PUBLIC;
CREATE EVENT TRIGGER jq_extension_dropped ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION')
    EXECUTE FUNCTION jq_extension_dropped();

-- Monitoring: members of the built-in pg_monitor role read every queue's figures (the views,
-- jq_metrics and the counters) and gain nothing else.
SELECT jq_sync_schema_usage('pg_monitor'::pg_catalog.regrole, true);
GRANT SELECT ON jq_queue_stats, jq_queue_health, jq_maintenance TO pg_monitor;
GRANT EXECUTE ON FUNCTION jq_can_see(text), jq_metrics(), jq_queue_counters(), jq_failure_counts(),
    jq_maintenance_status(), jq_status_eq(jq_status, jq_status), jq_status_ne(jq_status, jq_status),
    jq_status_lt(jq_status, jq_status), jq_status_le(jq_status, jq_status),
    jq_status_gt(jq_status, jq_status), jq_status_ge(jq_status, jq_status) TO pg_monitor;
