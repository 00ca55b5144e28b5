-- Queue settings: the CHECK constraints of jq_queues (Tables and views, "jq_queues": a bad setting
-- written directly is refused with 23514), their interval bounds (no negative part, at most 100
-- years), and jq_configure (README section "jq_configure": it changes only the settings it names,
-- and refuses a bad one with 22023 naming "settings", changing nothing).
\set SHOW_CONTEXT never
-- Start from empty tables, whatever the files before this one left.
TRUNCATE jq_job_events, jq_live_jobs, jq_job_history, jq_queues;

-- Each refusal of the table's constraints names the constraint. Terse: the DETAIL would repeat the
-- whole failing row.
\set VERBOSITY terse

-- The rules of the table in "jq_queues": each setting's lower bound, and the queue name's rule.
INSERT INTO jq_queues (queue_name, default_lease) VALUES ('q', '0 s');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, max_attempts) VALUES ('q', 0);
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, backoff_base) VALUES ('q', '0 s');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, backoff_base, backoff_cap) VALUES ('q', '1 min', '1 s');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, max_runtime) VALUES ('q', '-1 s');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name) VALUES ('bad name');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name) VALUES (repeat('q', 61));
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('q', 0);
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('q', '0 s');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, retention) VALUES ('q', '-1 day');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, warn_claimable_age) VALUES ('q', '0 s');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, warn_expiring_leases) VALUES ('q', 0);
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, warn_dead_age) VALUES ('q', '-1 s');
\echo :SQLSTATE

-- "Every interval setting also has no negative part and is at most 100 years": too long, or with a
-- negative part although the whole compares as positive ('1 mon -30 days 23:59:59' is less than a
-- day as intervals compare, yet can add two).
INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('q', '300000 years');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, default_lease) VALUES ('q', '300000 years');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, max_runtime) VALUES ('q', '1 mon -30 days 23:59:59');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, retention) VALUES ('q', '10000 years');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, backoff_base, backoff_cap) VALUES ('q', '1 s', '101 years');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, warn_dead_age) VALUES ('q', '1 day -1 s');
\echo :SQLSTATE
INSERT INTO jq_queues (queue_name, warn_claimable_age) VALUES ('q', '101 years');
\echo :SQLSTATE
\set VERBOSITY default

-- None of them was stored.
SELECT count(*) AS queues FROM jq_queues;

-- Accepted: exactly 100 years, mixed units without a negative part, a warn_dead_age of zero, and
-- NULL where the table allows it (no fairness bound, keep history, never warn).
INSERT INTO jq_queues (queue_name, retention, max_runtime, warn_dead_age)
VALUES ('q', '100 years', '1 mon 2 days', '0');
INSERT INTO jq_queues (queue_name, starvation_limit, retention, warn_claimable_age, warn_expiring_leases, warn_dead_age)
VALUES ('nulls', NULL, NULL, NULL, NULL, NULL);
SELECT queue_name, retention, max_runtime, warn_dead_age, starvation_limit FROM jq_queues ORDER BY queue_name;

-- jq_configure changes the settings it names and returns all of them; the others keep their
-- defaults.
SELECT key, value FROM jsonb_each(jq_configure('cfg', '{"max_attempts": 3, "concurrency_limit": 2}')) ORDER BY key;
-- A JSON null sets a setting to NULL; a setting not named is kept; '{}' only reads.
SELECT s->'concurrency_limit' AS concurrency_limit, s->'max_attempts' AS max_attempts
FROM jq_configure('cfg', '{"concurrency_limit": null}') s;
SELECT s->'concurrency_limit' AS concurrency_limit, s->'max_attempts' AS max_attempts
FROM jq_configure('cfg', '{}') s;

-- Refused with 22023, naming "settings": an unknown setting, something other than an object, a value
-- the constraints refuse, a JSON null for a setting that cannot be NULL, a default_lease over
-- pg_jobqueue.max_lease (Security: jq_configure checks it), a value of the wrong type. A refusal
-- refuses the whole change: the valid max_attempts next to a bad setting is not applied either.
SELECT jq_configure('cfg', '{"nonsense": 1}');
\echo :SQLSTATE
-- keep_succeeded is a boolean (as PostgreSQL reads one), never NULL.
SELECT jq_configure('cfg', '{"keep_succeeded": null}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"keep_succeeded": "maybe"}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '[1]');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"key_concurrency_limit": 0}');
\echo :SQLSTATE
-- Rate limits: positive, each with its period, the period bounded like every interval setting.
SELECT jq_configure('cfg', '{"rate_limit": 0, "rate_period": "1 s"}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"rate_limit": 10}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"key_rate_period": "1 minute"}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"rate_limit": 10, "rate_period": "0 s"}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"key_rate_limit": 10, "key_rate_period": "300000 years"}');
\echo :SQLSTATE
SELECT s->'rate_limit' AS rate_limit, s->'rate_period' AS rate_period
FROM jq_configure('cfg', '{"rate_limit": 100, "rate_period": "1 second"}') s;

-- jq_configure_key: one concurrency key's own limit and weight; the same rules for bad values.
SELECT jq_configure_key('cfg', 'tenant-1', '{"weight": 3, "concurrency_limit": 2}');
SELECT jq_configure_key('cfg', 'tenant-1', '{}');
SELECT jq_configure_key('cfg', 'tenant-1', '{"weight": 0}');
\echo :SQLSTATE
SELECT jq_configure_key('cfg', 'tenant-1', '{"weight": 1001}');
\echo :SQLSTATE
SELECT jq_configure_key('cfg', 'tenant-1', '{"concurrency_limit": 0}');
\echo :SQLSTATE
SELECT jq_configure_key('cfg', 'tenant-1', '{"limit": 1}');
\echo :SQLSTATE
SELECT jq_configure_key('cfg', NULL, '{}');
\echo :SQLSTATE
SELECT jq_configure_key('cfg', '', '{}');
\echo :SQLSTATE
SELECT jq_configure_key('bad name', 'tenant-1', '{}');
\echo :SQLSTATE
SELECT jq_configure_key('cfg', 'tenant-1', NULL);
\echo :SQLSTATE
-- The refusals changed nothing.
SELECT queue_name, concurrency_key, concurrency_limit, weight FROM jq_key_settings ORDER BY 1, 2;
SELECT jq_configure('cfg', '{"max_attempts": 0}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"max_attempts": null}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"max_attempts": 5, "default_lease": "2 days"}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"max_attempts": 5, "retention": "-1 s"}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"max_attempts": 5, "starvation_limit": "300000 years"}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"max_attempts": "five"}');
\echo :SQLSTATE
SELECT jq_configure('cfg', '{"max_attempts": 5, "paused": "maybe"}');
\echo :SQLSTATE

-- The common argument rules: 22004 for a NULL queue_name or settings, 22023 for a bad queue name.
SELECT jq_configure(NULL, '{}');
\echo :SQLSTATE
SELECT jq_configure('cfg', NULL);
\echo :SQLSTATE
SELECT jq_configure('bad name', '{}');
\echo :SQLSTATE

-- A refused change on a queue that had no settings row does not create one.
SELECT jq_configure('fresh', '{"max_attempts": 0}');
\echo :SQLSTATE

-- Nothing changed: 'cfg' keeps max_attempts 3 and no concurrency_limit, and no queue was added.
SELECT queue_name, max_attempts, concurrency_limit, paused, retention, default_lease
FROM jq_queues ORDER BY queue_name;

-- A settings value nested however deep is read by the server, and refused with 22023 like any
-- other bad value: an array for a setting, or no object at all.
SELECT jq_configure('emails', ('{"max_attempts": ' || repeat('[', 127) || repeat(']', 127) || '}')::jsonb);
\echo :SQLSTATE
SELECT jq_configure('emails', (repeat('[', 127) || repeat(']', 127))::jsonb);
\echo :SQLSTATE
SELECT jq_configure_key('emails', 'k', ('{"weight": ' || repeat('{"a": ', 127) || '1' || repeat('}', 127) || '}')::jsonb);
\echo :SQLSTATE
