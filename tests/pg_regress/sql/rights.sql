-- Rights (guide, "Security" and section "jq_grant, jq_revoke, jq_has_right"): the bad arguments of
-- jq_grant, jq_revoke and jq_has_right (22004 for NULL, 22023 for a bad pattern or privilege), and
-- 42501 for a call without the right, which changes nothing. A role with no grant has no EXECUTE
-- on any function (revoked from PUBLIC): PostgreSQL refuses the call before the function runs. A
-- role with EXECUTE but no right on the queue is refused by the function, whether or not the job id
-- and token it gave were right; a verb that names a job of a queue the caller may not use answers
-- as for a job that does not exist (false, no row), so it learns nothing of other queues' jobs.
\set SHOW_CONTEXT never
-- Start from empty tables, no grants, and job ids from 1, whatever the files before this one left.
TRUNCATE jq_job_events, jq_live_jobs, jq_job_history, jq_queues;
DELETE FROM jq_grants;
ALTER SEQUENCE jq_jobs_id_seq RESTART;
ALTER SEQUENCE jq_job_events_id_seq RESTART;

CREATE ROLE regress_jq_stranger;    -- no grant at all
CREATE ROLE regress_jq_producer;    -- enqueue on 'emails'
CREATE ROLE regress_jq_worker;      -- consume on 'emails'
CREATE ROLE regress_jq_ops;         -- manage on 'emails'

-- Job 1 of 'payroll', claimed by the owner as worker 'w' (token 1); job 2 of 'emails', pending.
SELECT jq_enqueue('payroll', '{"salary": 1}');
SELECT id, lease_token FROM jq_claim('payroll', 'w', interval '10 min');
SELECT jq_enqueue('emails', '{"to": "ada"}');
SELECT j::text AS payroll_before FROM jq_jobs j WHERE id = 1 \gset

-- jq_grant: 22004 for a NULL role, queue or privilege.
SELECT jq_grant(NULL, 'emails', 'consume');
\echo :SQLSTATE
SELECT jq_grant('regress_jq_worker', NULL, 'consume');
\echo :SQLSTATE
SELECT jq_grant('regress_jq_worker', 'emails', NULL);
\echo :SQLSTATE
-- 22023 for a queue that is neither a queue name nor a prefix followed by '*' (empty, over 60
-- characters, a bad character, a '*' anywhere but at the end), or an unknown privilege.
SELECT jq_grant('regress_jq_worker', '', 'consume');
\echo :SQLSTATE
SELECT jq_grant('regress_jq_worker', repeat('q', 61), 'consume');
\echo :SQLSTATE
SELECT jq_grant('regress_jq_worker', 'bad name', 'consume');
\echo :SQLSTATE
SELECT jq_grant('regress_jq_worker', 'billing.*.eu', 'consume');
\echo :SQLSTATE
SELECT jq_grant('regress_jq_worker', '**', 'consume');
\echo :SQLSTATE
SELECT jq_grant('regress_jq_worker', repeat('q', 60) || '*', 'consume');
\echo :SQLSTATE
SELECT jq_grant('regress_jq_worker', 'emails', 'read');
\echo :SQLSTATE
SELECT jq_grant('regress_jq_worker', 'emails', 'Consume');
\echo :SQLSTATE
-- A role that does not exist is refused by PostgreSQL's regrole input (42704), before the call.
SELECT jq_grant('regress_jq_nobody', 'emails', 'consume');
\echo :SQLSTATE

-- jq_revoke checks its arguments the same way.
SELECT jq_revoke(NULL, 'emails', 'consume');
\echo :SQLSTATE
SELECT jq_revoke('regress_jq_worker', NULL, 'consume');
\echo :SQLSTATE
SELECT jq_revoke('regress_jq_worker', 'emails', NULL);
\echo :SQLSTATE
SELECT jq_revoke('regress_jq_worker', 'bad name', 'consume');
\echo :SQLSTATE
SELECT jq_revoke('regress_jq_worker', 'emails', 'read');
\echo :SQLSTATE

-- No right was written, and no EXECUTE given.
SELECT count(*) AS grants FROM jq_grants;
SELECT has_function_privilege('regress_jq_worker', 'jq_claim(text, text, interval, integer, interval)',
                              'EXECUTE') AS worker_may_claim;

-- Accepted: a queue name, a prefix pattern, '*' alone, the longest name and the longest prefix, and
-- a grant given twice (kept once).
SELECT jq_grant('regress_jq_producer', 'emails', 'enqueue');
SELECT jq_grant('regress_jq_producer', 'emails', 'enqueue');
SELECT jq_grant('regress_jq_worker', 'emails', 'consume');
SELECT jq_grant('regress_jq_ops', 'emails', 'manage');
SELECT jq_grant('regress_jq_ops', 'billing.*', 'monitor');
SELECT jq_grant('regress_jq_ops', '*', 'monitor');
SELECT jq_grant('regress_jq_ops', repeat('q', 60), 'monitor');
SELECT jq_grant('regress_jq_ops', repeat('q', 59) || '*', 'monitor');
SELECT role, CASE WHEN length(queue) > 20 THEN left(queue, 3) || '...' || right(queue, 3) ELSE queue END AS queue,
       length(queue) AS queue_length, privilege
FROM jq_grants ORDER BY role::text, jq_grants.queue, privilege;
-- Each role may execute exactly the functions its privileges use (the table in "Security"), and
-- those any right gives: the figures (with jq_maintenance's), jq_has_right and jq_cron_next.
SELECT r.rolname,
       string_agg(p.proname, ', ' ORDER BY p.proname)
           FILTER (WHERE p.proname NOT IN ('jq_can_see', 'jq_has_right', 'jq_metrics', 'jq_queue_counters',
                                           'jq_failure_counts', 'jq_maintenance_status', 'jq_cron_next')) AS may_execute,
       count(*) FILTER (WHERE p.proname IN ('jq_can_see', 'jq_has_right', 'jq_metrics', 'jq_queue_counters',
                                            'jq_failure_counts', 'jq_maintenance_status')) = 6 AS and_the_figures
FROM pg_roles r
CROSS JOIN pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_jobqueue'
WHERE r.rolname LIKE 'regress_jq_%' AND has_function_privilege(r.oid, p.oid, 'EXECUTE')
GROUP BY r.rolname ORDER BY r.rolname;
-- jq_revoke says whether there was such a right: false for one never given (a pattern is revoked
-- only as it was granted, not by a queue it covers), true for one that was.
SELECT jq_revoke('regress_jq_ops', 'billing.eu', 'monitor') AS revoked_unknown;
SELECT jq_revoke('regress_jq_ops', 'billing.*', 'monitor') AS revoked;
SELECT jq_revoke('regress_jq_ops', '*', 'monitor') AS revoked;
SELECT jq_revoke('regress_jq_ops', repeat('q', 60), 'monitor') AS revoked;
SELECT jq_revoke('regress_jq_ops', repeat('q', 59) || '*', 'monitor') AS revoked;

-- jq_has_right: 22004 for a NULL queue_name or privilege, 22023 for a bad name or privilege.
SELECT jq_has_right(NULL, 'consume');
\echo :SQLSTATE
SELECT jq_has_right('emails', NULL);
\echo :SQLSTATE
SELECT jq_has_right('bad name', 'consume');
\echo :SQLSTATE
SELECT jq_has_right('emails', 'read');
\echo :SQLSTATE

-- A role without any grant: 42501 "permission denied for function" for every function, bad
-- arguments included (it learns nothing about them), and for the tables and views.
SET ROLE regress_jq_stranger;
SELECT jq_enqueue('emails', '{}');
\echo :SQLSTATE
SELECT jq_enqueue(NULL, '{}');
\echo :SQLSTATE
SELECT jq_enqueue_batch('emails', ARRAY['{}']::jsonb[]);
\echo :SQLSTATE
SELECT jq_claim('emails', 'w');
\echo :SQLSTATE
SELECT jq_heartbeat(1, 'w', 1);
\echo :SQLSTATE
SELECT jq_complete(1, 'w', 1);
\echo :SQLSTATE
SELECT jq_complete_batch(ARRAY[1]::bigint[], 'w', ARRAY[1]::bigint[]);
\echo :SQLSTATE
SELECT jq_fail(1, 'w', 1, 'E');
\echo :SQLSTATE
SELECT jq_configure('emails', '{}');
\echo :SQLSTATE
SELECT jq_cancel(2);
\echo :SQLSTATE
SELECT jq_retry(2);
\echo :SQLSTATE
SELECT jq_retry_dead('emails');
\echo :SQLSTATE
SELECT jq_purge_dead('emails');
\echo :SQLSTATE
SELECT jq_reap();
\echo :SQLSTATE
SELECT jq_prune();
\echo :SQLSTATE
SELECT jq_stats_reset();
\echo :SQLSTATE
SELECT jq_backoff('emails', 1);
\echo :SQLSTATE
SELECT jq_grant('regress_jq_stranger', '*', 'manage');
\echo :SQLSTATE
SELECT jq_revoke('regress_jq_worker', 'emails', 'consume');
\echo :SQLSTATE
SELECT jq_has_right('emails', 'consume');
\echo :SQLSTATE
SELECT jq_metrics();
\echo :SQLSTATE
SELECT * FROM jq_queue_counters();
\echo :SQLSTATE
SELECT * FROM jq_failure_counts();
\echo :SQLSTATE
SELECT count(*) FROM jq_jobs;
\echo :SQLSTATE
SELECT count(*) FROM jq_job_events;
\echo :SQLSTATE
SELECT count(*) FROM jq_queues;
\echo :SQLSTATE
SELECT count(*) FROM jq_grants;
\echo :SQLSTATE
SELECT count(*) FROM jq_queue_stats;
\echo :SQLSTATE
SELECT count(*) FROM jq_managed_jobs;
\echo :SQLSTATE
RESET ROLE;

-- A role given EXECUTE by hand but no right on any queue: 42501 for a job of any queue and for one
-- that does not exist alike, naming no queue.
GRANT EXECUTE ON FUNCTION jq_complete(bigint, text, bigint, jsonb), jq_cancel(bigint) TO regress_jq_stranger;
SET ROLE regress_jq_stranger;
SELECT jq_complete(1, 'w', 1);
\echo :SQLSTATE
SELECT jq_complete(999, 'w', 1);
\echo :SQLSTATE
SELECT jq_cancel(2);
\echo :SQLSTATE
RESET ROLE;
REVOKE EXECUTE ON FUNCTION jq_complete(bigint, text, bigint, jsonb), jq_cancel(bigint) FROM regress_jq_stranger;

-- A consumer of 'emails' can neither claim, heartbeat, complete nor fail a 'payroll' job: the claim
-- is refused with 42501 naming the right and the queue; the verbs on the job answer false as for a
-- job that does not exist (job 999), with the right id and token as with a wrong one, and change
-- nothing. It has no EXECUTE on what its privilege does not use. Its own queue it may claim.
SET ROLE regress_jq_worker;
SELECT jq_has_right('emails', 'consume') AS emails_consume, jq_has_right('payroll', 'consume') AS payroll_consume,
       jq_has_right('emails', 'enqueue') AS emails_enqueue;
SELECT jq_claim('payroll', 'w');
\echo :SQLSTATE
SELECT jq_heartbeat(1, 'w', 1);
\echo :SQLSTATE
SELECT jq_complete(1, 'w', 1);
\echo :SQLSTATE
SELECT jq_complete(1, 'w', 2);
\echo :SQLSTATE
SELECT jq_complete_batch(ARRAY[1]::bigint[], 'w', ARRAY[1]::bigint[]);
\echo :SQLSTATE
SELECT jq_fail(1, 'w', 1, 'E');
\echo :SQLSTATE
SELECT jq_complete(999, 'w', 1) AS no_such_job;
SELECT jq_progress_of(1, 'w', 1) IS NULL AS right_token_no_progress, jq_progress_of(1, 'w', 2) IS NULL AS wrong_token_no_progress;
SELECT count(*) AS payroll_result_rows FROM jq_result(1);
SELECT jq_enqueue('emails', '{}');
\echo :SQLSTATE
SELECT jq_cancel(2);
\echo :SQLSTATE
SELECT count(*) FROM jq_jobs;
\echo :SQLSTATE
SELECT id, queue_name, attempt_count FROM jq_claim('emails', 'w2');
-- Any right on a queue also shows that queue's figures, and only that queue's.
SELECT queue_name, pending, running FROM jq_queue_stats ORDER BY queue_name;
RESET ROLE;

-- A producer of 'emails' cannot enqueue into 'payroll'.
SET ROLE regress_jq_producer;
SELECT jq_enqueue('payroll', '{}');
\echo :SQLSTATE
SELECT jq_enqueue_batch('payroll', ARRAY['{}']::jsonb[]);
\echo :SQLSTATE
SELECT jq_claim('emails', 'w');
\echo :SQLSTATE
RESET ROLE;

-- A manager of 'emails' can neither change 'payroll''s settings nor cancel, re-drive or purge its
-- jobs (a job in no state to re-drive is refused the same); jq_reap, jq_prune, jq_stats_reset and
-- jq_grant are the owner's alone, whatever rights on queues a role holds.
SET ROLE regress_jq_ops;
SELECT jq_configure('payroll', '{"paused": true}');
\echo :SQLSTATE
SELECT jq_configure_key('payroll', 'tenant-1', '{"weight": 2}');
\echo :SQLSTATE
SELECT jq_cancel(1);
\echo :SQLSTATE
SELECT jq_retry(1);
\echo :SQLSTATE
SELECT jq_retry_dead('payroll');
\echo :SQLSTATE
SELECT jq_purge_dead('payroll');
\echo :SQLSTATE
SELECT jq_reap();
\echo :SQLSTATE
SELECT jq_prune();
\echo :SQLSTATE
SELECT jq_stats_reset();
\echo :SQLSTATE
SELECT jq_grant('regress_jq_ops', '*', 'manage');
\echo :SQLSTATE
SELECT jq_claim('emails', 'w');
\echo :SQLSTATE
-- What it may do: read its queue's jobs (only those) and change its queue's settings.
SELECT id, queue_name, status FROM jq_managed_jobs ORDER BY id;
SELECT jq_configure('emails', '{"max_attempts": 4}')->'max_attempts' AS max_attempts;
SELECT jq_configure_key('emails', 'tenant-1', '{"weight": 2}')->'weight' AS weight;
RESET ROLE;

-- No refused call changed the 'payroll' job, wrote an event or a right; 'emails' changed only by
-- the allowed calls (its job claimed by its consumer, its settings row made by its manager).
SELECT j::text = :'payroll_before' AS payroll_unchanged FROM jq_jobs j WHERE id = 1;
SELECT id, queue_name, status, lease_owner FROM jq_jobs ORDER BY id;
SELECT count(*) AS events FROM jq_job_events;
SELECT queue_name, max_attempts, paused FROM jq_queues ORDER BY queue_name;
SELECT role, queue, privilege FROM jq_grants ORDER BY role::text, queue, privilege;

-- A re-drive that a live job's dedup key would refuse is refused for want of the right first: a
-- manager of 'emails' learns nothing of 'payroll''s keys (42501, not 23505 naming the key).
SELECT jq_enqueue('payroll', '{}', dedup_key => 'salary-run') AS keyed \gset
SELECT lease_token AS keyed_token FROM jq_claim('payroll', 'w', interval '10 min') \gset
SELECT jq_fail(:keyed, 'w', :keyed_token, 'E', retryable => false);
SELECT jq_enqueue('payroll', '{}', dedup_key => 'salary-run') <> :keyed AS another_holds_the_key;
SET ROLE regress_jq_ops;
SELECT jq_retry(:keyed);
\echo :SQLSTATE
RESET ROLE;

-- The roles go again; jq_revoke takes back the EXECUTE rights jq_grant gave.
SELECT jq_revoke('regress_jq_producer', 'emails', 'enqueue'), jq_revoke('regress_jq_worker', 'emails', 'consume'),
       jq_revoke('regress_jq_ops', 'emails', 'manage');
SELECT has_function_privilege('regress_jq_worker', 'jq_claim(text, text, interval, integer, interval)',
                              'EXECUTE') AS worker_may_claim;
DROP OWNED BY regress_jq_stranger, regress_jq_producer, regress_jq_worker, regress_jq_ops;
DROP ROLE regress_jq_stranger, regress_jq_producer, regress_jq_worker, regress_jq_ops;
