-- Settings (guide, "Settings"): the limits are PGC_SUSET, so only a superuser, or a role granted
-- SET on them, can change them; a value outside a setting's range is refused with 22023; and the
-- limits decide what the functions accept, with a value over a limit refused, never clamped.
\set SHOW_CONTEXT never
-- Start from empty tables, whatever the files before this one left.
TRUNCATE jq_job_events, jq_live_jobs, jq_job_history, jq_queues;
-- The library defines its settings when it is loaded. Load it first, so that a SET below meets the
-- real setting and not a placeholder that any role may set.
LOAD 'pg_jobqueue';

-- The defaults of the table in "Settings".
SELECT name, current_setting(name) AS value, context FROM pg_settings
WHERE name IN ('pg_jobqueue.max_payload_bytes', 'pg_jobqueue.max_lease', 'pg_jobqueue.max_batch_size',
               'pg_jobqueue.max_retry_delay', 'pg_jobqueue.inline_reap_max',
               'pg_jobqueue.inline_reap_interval', 'pg_jobqueue.max_wait', 'pg_jobqueue.stats',
               'pg_jobqueue.wait_recheck', 'pg_jobqueue.reaper_enabled', 'pg_jobqueue.reaper_interval',
               'pg_jobqueue.reaper_max_jobs', 'pg_jobqueue.prune_interval')
ORDER BY name;

-- A superuser may raise a limit, and the functions then accept what it allows.
SET pg_jobqueue.max_batch_size = 5000;
SELECT count(*) FROM jq_claim('q', 'w', batch_size => 5000);
RESET pg_jobqueue.max_batch_size;

-- A role without SET on them may not change any of them: has_parameter_privilege says so, and SET
-- fails with 42501, to raise a limit or to lower it.
CREATE ROLE regress_jq_client;
SELECT name, has_parameter_privilege('regress_jq_client', name, 'SET') AS may_set
FROM (VALUES ('pg_jobqueue.max_batch_size'), ('pg_jobqueue.max_lease'), ('pg_jobqueue.max_payload_bytes'),
             ('pg_jobqueue.max_retry_delay'), ('pg_jobqueue.max_wait'), ('pg_jobqueue.inline_reap_max'),
             ('pg_jobqueue.inline_reap_interval'), ('pg_jobqueue.stats'), ('pg_jobqueue.wait_recheck')) AS s(name)
ORDER BY name;
SET ROLE regress_jq_client;
SET pg_jobqueue.max_batch_size = 5000;
\echo :SQLSTATE
SET pg_jobqueue.max_lease = '7d';
\echo :SQLSTATE
SET pg_jobqueue.max_payload_bytes = '1GB';
\echo :SQLSTATE
SET pg_jobqueue.max_retry_delay = '3650d';
\echo :SQLSTATE
SET pg_jobqueue.max_wait = '1h';
\echo :SQLSTATE
SET pg_jobqueue.inline_reap_max = 0;
\echo :SQLSTATE
SET pg_jobqueue.stats = off;
\echo :SQLSTATE
SHOW pg_jobqueue.max_batch_size;
RESET ROLE;

-- A role granted SET on one of them may change that one, and only that one.
GRANT SET ON PARAMETER pg_jobqueue.max_batch_size TO regress_jq_client;
SELECT has_parameter_privilege('regress_jq_client', 'pg_jobqueue.max_batch_size', 'SET') AS may_set;
SET ROLE regress_jq_client;
SET pg_jobqueue.max_batch_size = 5000;
SHOW pg_jobqueue.max_batch_size;
SET pg_jobqueue.max_lease = '7d';
\echo :SQLSTATE
RESET pg_jobqueue.max_batch_size;
RESET ROLE;
REVOKE SET ON PARAMETER pg_jobqueue.max_batch_size FROM regress_jq_client;
DROP ROLE regress_jq_client;

-- A value outside a setting's range is refused with 22023, even for a superuser.
SET pg_jobqueue.max_batch_size = 0;
\echo :SQLSTATE
-- The server words the range of a setting with a unit differently by version (15: "(1 .. 2147483647)",
-- 18: "(1 B .. 2147483647 B)"): for those two, only the SQLSTATE is shown.
\set VERBOSITY sqlstate
SET pg_jobqueue.max_payload_bytes = 0;
\set VERBOSITY default
\echo :SQLSTATE
SET pg_jobqueue.inline_reap_max = 10001;
\echo :SQLSTATE
\set VERBOSITY sqlstate
SET pg_jobqueue.wait_recheck = '1ms';
\set VERBOSITY default
\echo :SQLSTATE
SET pg_jobqueue.stats = maybe;
\echo :SQLSTATE
-- The background reaper's settings are read from the configuration file: no session sets them.
SET pg_jobqueue.reaper_interval = '5s';
\echo :SQLSTATE
SET pg_jobqueue.reaper_enabled = off;
\echo :SQLSTATE
-- The prefix is reserved: a misspelt setting is refused rather than kept as a placeholder.
SET pg_jobqueue.max_batchsize = 10;
\echo :SQLSTATE

-- A lowered limit is applied to the arguments at once, with 22023 naming the limit and its value.
SET pg_jobqueue.max_lease = '1min';
SELECT jq_claim('q', 'w', interval '61 s');
\echo :SQLSTATE
SELECT jq_heartbeat(1, 'w', 1, interval '2 min');
\echo :SQLSTATE
SELECT jq_configure('q', '{"default_lease": "2 min"}');
\echo :SQLSTATE
RESET pg_jobqueue.max_lease;
SET pg_jobqueue.max_retry_delay = '1h';
SELECT jq_fail(1, 'w', 1, 'E', retry_in => interval '61 min');
\echo :SQLSTATE
RESET pg_jobqueue.max_retry_delay;
SET pg_jobqueue.max_wait = 0;
SELECT jq_claim('q', 'w', wait => interval '1 s');
\echo :SQLSTATE
RESET pg_jobqueue.max_wait;

-- Nothing was written by any of them.
SELECT (SELECT count(*) FROM jq_jobs) AS jobs, (SELECT count(*) FROM jq_job_events) AS events,
       (SELECT count(*) FROM jq_queues) AS queues;
