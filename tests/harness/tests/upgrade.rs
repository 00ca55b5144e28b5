//! Upgrades in place: a database on an earlier release (its frozen install script in sql/released)
//! holds jobs, is upgraded with `ALTER EXTENSION pg_jobqueue UPDATE`, keeps its jobs and leases, and
//! then has exactly the objects of a fresh install of the current version.
//!
//! The library installed is always the current one, and it refuses to serve the tables of an older
//! release; so the jobs of before the upgrade are written here as that release's functions left
//! them (`jobs_as_0_2_0`, `jobs_as_0_3_0`), leases included.

use jq_harness::client::connect_as;
use jq_harness::{text_rows, wait_until, Client, Cluster};

/// Writes into the `jq_jobs` table of 0.1.0 or 0.2.0 (the same table) jobs of `queue` in every
/// state, as those releases' functions left them: five succeeded, one succeeded after a failure,
/// one dead, one cancelled (each with its event), one scheduled with a dedup key, one with an
/// ordering key, three pending of priority 5, and two running under leases of worker 'holder' that
/// end in an hour. Returns the two leases as (id, token).
fn jobs_as_0_2_0(client: &mut Client, queue: &str) -> Vec<(i64, i64)> {
    client
        .batch_execute(&format!(
            "INSERT INTO jq_jobs (queue_name, payload, status, available_at, attempt_count, max_attempts, lease_token,
                                  lease_length, claimed_at, created_at, finished_at)
             SELECT '{queue}', '{{\"kind\": \"done\"}}', 'succeeded', now() - interval '1 minute', 1, 8, 1,
                    interval '1 hour', now() - interval '30 s', now() - interval '1 minute', now() - interval '20 s'
             FROM generate_series(1, 5);
             WITH j AS (
                 INSERT INTO jq_jobs (queue_name, payload, status, available_at, attempt_count, max_attempts,
                                      lease_token, lease_length, claimed_at, last_error_code, last_error_message,
                                      created_at, finished_at)
                 VALUES ('{queue}', '{{\"kind\": \"flaky\"}}', 'succeeded', now() - interval '9 s', 2, 3, 2,
                         interval '60 s', now() - interval '5 s', 'FLAKY', 'first try', now() - interval '1 minute', now())
                 RETURNING id, queue_name)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token, error_code, error_message)
             SELECT id, queue_name, 'failed', 'pending', now() - interval '10 s', 1, 'w', 1, 'FLAKY', 'first try' FROM j;
             WITH j AS (
                 INSERT INTO jq_jobs (queue_name, payload, status, available_at, attempt_count, max_attempts,
                                      lease_token, lease_length, claimed_at, last_error_code, last_error_message,
                                      created_at, finished_at)
                 VALUES ('{queue}', '{{\"kind\": \"dead\"}}', 'dead', now() - interval '1 minute', 1, 8, 1,
                         interval '60 s', now() - interval '30 s', 'BROKEN', 'no retry', now() - interval '1 minute', now())
                 RETURNING id, queue_name)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token, error_code, error_message)
             SELECT id, queue_name, 'failed', 'dead', now(), 1, 'w', 1, 'BROKEN', 'no retry' FROM j;
             WITH j AS (
                 INSERT INTO jq_jobs (queue_name, payload, status, available_at, max_attempts, created_at, finished_at)
                 VALUES ('{queue}', '{{\"kind\": \"cancelled\"}}', 'cancelled', now(), 8, now(), now())
                 RETURNING id, queue_name)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, lease_token)
             SELECT id, queue_name, 'cancelled', 'cancelled', now(), 0, 0 FROM j;
             INSERT INTO jq_jobs (queue_name, payload, available_at, max_attempts, dedup_key, created_at)
             VALUES ('{queue}', '{{\"kind\": \"later\"}}', now() + interval '1 day', 8, 'd1', now());
             INSERT INTO jq_jobs (queue_name, payload, available_at, max_attempts, ordering_key, created_at)
             VALUES ('{queue}', '{{\"kind\": \"keyed\"}}', now(), 8, 'k', now());
             INSERT INTO jq_jobs (queue_name, payload, priority, available_at, max_attempts, created_at)
             SELECT '{queue}', '{{\"kind\": \"pending\"}}', 5, now(), 8, now() FROM generate_series(1, 3);"
        ))
        .unwrap();
    client
        .query(
            "INSERT INTO jq_jobs (queue_name, payload, status, available_at, attempt_count, max_attempts, lease_owner,
                                  lease_token, lease_expires_at, lease_length, claimed_at, created_at)
             SELECT $1, '{\"kind\": \"held\"}', 'running', now(), 1, 8, 'holder', 7, now() + interval '1 hour',
                    interval '1 hour', now(), now()
             FROM generate_series(1, 2)
             RETURNING id, lease_token",
            &[&queue],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// Writes into the tables of 0.3.0 jobs of `queue` in every state, as 0.3.0's functions left them:
/// in the history, five succeeded with a result and one succeeded after a failure (with its event);
/// in the hot table, one dead and one cancelled (each with its event), one snoozed (with its event),
/// one scheduled with a dedup key, one with an ordering key, one with a concurrency key and a
/// deadline, three pending of priority 5, and two running under leases of worker 'holder' that end
/// in an hour. Returns the two leases as (id, token).
fn jobs_as_0_3_0(client: &mut Client, queue: &str) -> Vec<(i64, i64)> {
    // A queue gets its number from its first enqueue, and is marked once a job had an ordering key.
    client
        .batch_execute(&format!(
            "INSERT INTO jq_queue_ids (queue_name, ordering_keys) VALUES ('{queue}', true);
             INSERT INTO jq_job_history (id, queue_id, payload, priority, available_at, attempt_count, max_attempts,
                                         lease_token, lease_length, claimed_at, created_at, finished_at, progress,
                                         result)
             SELECT nextval('jq_jobs_id_seq'), q.queue_id, '{{\"kind\": \"done\"}}', 0, now() - interval '1 minute', 1,
                    8, 1, interval '1 hour', now() - interval '30 s', now() - interval '1 minute',
                    now() - interval '20 s', '{{\"step\": 2}}', jsonb_build_object('n', n)
             FROM jq_queue_ids q, generate_series(1, 5) AS n WHERE q.queue_name = '{queue}';
             WITH j AS (
                 INSERT INTO jq_job_history (id, queue_id, payload, priority, available_at, attempt_count,
                                             max_attempts, lease_token, lease_length, claimed_at, last_error_code,
                                             last_error_message, created_at, finished_at)
                 SELECT nextval('jq_jobs_id_seq'), q.queue_id, '{{\"kind\": \"flaky\"}}', 0, now() - interval '9 s',
                        2, 3, 2, interval '60 s', now() - interval '5 s', 'FLAKY', 'first try',
                        now() - interval '1 minute', now()
                 FROM jq_queue_ids q WHERE q.queue_name = '{queue}'
                 RETURNING id)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token,
                                        error_code, error_message)
             SELECT id, '{queue}', 'failed', 'pending', now() - interval '10 s', 1, 'w', 1, 'FLAKY', 'first try'
             FROM j;
             WITH j AS (
                 INSERT INTO jq_live_jobs (queue_id, payload, status, available_at, attempt_count, max_attempts,
                                           lease_token, lease_length, claimed_at, last_error_code,
                                           last_error_message, created_at, finished_at)
                 SELECT q.queue_id, '{{\"kind\": \"dead\"}}', 'dead', now() - interval '1 minute', 1, 8, 1,
                        interval '60 s', now() - interval '30 s', 'BROKEN', 'no retry', now() - interval '1 minute',
                        now()
                 FROM jq_queue_ids q WHERE q.queue_name = '{queue}'
                 RETURNING id)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token,
                                        error_code, error_message)
             SELECT id, '{queue}', 'failed', 'dead', now(), 1, 'w', 1, 'BROKEN', 'no retry' FROM j;
             WITH j AS (
                 INSERT INTO jq_live_jobs (queue_id, payload, status, available_at, max_attempts, created_at,
                                           finished_at)
                 SELECT q.queue_id, '{{\"kind\": \"cancelled\"}}', 'cancelled', now(), 8, now(), now()
                 FROM jq_queue_ids q WHERE q.queue_name = '{queue}'
                 RETURNING id)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, lease_token)
             SELECT id, '{queue}', 'cancelled', 'cancelled', now(), 0, 0 FROM j;
             WITH j AS (
                 INSERT INTO jq_live_jobs (queue_id, payload, available_at, attempt_count, max_attempts, lease_token,
                                           lease_length, claimed_at, created_at, progress)
                 SELECT q.queue_id, '{{\"kind\": \"snoozed\"}}', now() + interval '1 hour', 0, 8, 1,
                        interval '60 s', now() - interval '10 s', now() - interval '1 minute', '{{\"step\": 1}}'
                 FROM jq_queue_ids q WHERE q.queue_name = '{queue}'
                 RETURNING id)
             INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token)
             SELECT id, '{queue}', 'snoozed', 'pending', now(), 1, 'w', 1 FROM j;
             INSERT INTO jq_live_jobs (queue_id, payload, available_at, max_attempts, dedup_key, created_at)
             SELECT q.queue_id, '{{\"kind\": \"later\"}}', now() + interval '1 day', 8, 'd1', now()
             FROM jq_queue_ids q WHERE q.queue_name = '{queue}';
             INSERT INTO jq_live_jobs (queue_id, payload, available_at, max_attempts, ordering_key, created_at)
             SELECT q.queue_id, '{{\"kind\": \"ordered\"}}', now(), 8, 'k', now()
             FROM jq_queue_ids q WHERE q.queue_name = '{queue}';
             INSERT INTO jq_live_jobs (queue_id, payload, available_at, max_attempts, concurrency_key, expires_at,
                                       created_at)
             SELECT q.queue_id, '{{\"kind\": \"limited\"}}', now(), 8, 'c', now() + interval '1 day', now()
             FROM jq_queue_ids q WHERE q.queue_name = '{queue}';
             INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts, created_at)
             SELECT q.queue_id, '{{\"kind\": \"pending\"}}', 5, now(), 8, now()
             FROM jq_queue_ids q, generate_series(1, 3) WHERE q.queue_name = '{queue}';"
        ))
        .unwrap();
    client
        .query(
            "INSERT INTO jq_live_jobs (queue_id, payload, status, available_at, attempt_count, max_attempts,
                                       lease_owner, lease_token, lease_expires_at, lease_length, claimed_at,
                                       created_at)
             SELECT q.queue_id, '{\"kind\": \"held\"}', 'running', now(), 1, 8, 'holder', 7,
                    now() + interval '1 hour', interval '1 hour', now(), now()
             FROM jq_queue_ids q, generate_series(1, 2) WHERE q.queue_name = $1
             RETURNING id, lease_token",
            &[&queue],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[test]
fn an_upgrade_from_the_first_release_keeps_the_queue_and_matches_a_fresh_install() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE DATABASE upgraded").unwrap();
    admin.batch_execute("CREATE DATABASE fresh").unwrap();
    let connect = |db: &str| {
        postgres::Client::connect(&cluster.dsn().replace("dbname=postgres", &format!("dbname={db}")), postgres::NoTls)
            .unwrap()
    };

    let mut old = connect("upgraded");
    old.batch_execute("CREATE EXTENSION pg_jobqueue VERSION '0.1.0'").unwrap();
    old.batch_execute("INSERT INTO jq_queues (queue_name, max_attempts) VALUES ('kept', 3)").unwrap();
    let (id, token) = jobs_as_0_2_0(&mut old, "kept")[0];

    old.batch_execute("ALTER EXTENSION pg_jobqueue UPDATE").unwrap();
    let (installed, current): (String, String) = {
        let row = old
            .query_one(
                "SELECT e.extversion, a.default_version FROM pg_extension e
                 JOIN pg_available_extensions a ON a.name = e.extname WHERE e.extname = 'pg_jobqueue'",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(installed, current, "ALTER EXTENSION UPDATE did not reach the current version");
    assert_ne!(installed, "0.1.0", "this test needs a version after the first release");

    // The lease held across the upgrade is honoured after it, by a function the upgrade added.
    let completed: Vec<i64> = old
        .query("SELECT * FROM jq_complete_batch(ARRAY[$1::bigint], 'holder', ARRAY[$2::bigint])", &[&id, &token])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(completed, vec![id]);
    let pending: i64 = old.query_one("SELECT count(*) FROM jq_jobs WHERE status = 'pending'", &[]).unwrap().get(0);
    assert_eq!(pending, 5, "the other jobs of the old version are still there");

    let mut fresh = connect("fresh");
    fresh.batch_execute("CREATE EXTENSION pg_jobqueue").unwrap();
    let (upgraded, fresh) = (objects(&mut old), objects(&mut fresh));
    let differences: Vec<_> =
        upgraded.iter().filter(|o| !fresh.contains(o)).chain(fresh.iter().filter(|o| !upgraded.contains(o))).collect();
    assert!(differences.is_empty(), "the upgraded extension differs from a fresh install: {differences:#?}");
}

/// Every object of the extension with its full definition: functions, tables and their columns,
/// constraints, indexes, triggers, views, sequences, types, privileges, the initial privileges
/// (which pg_dump leaves out), and what pg_dump keeps.
fn objects(client: &mut Client) -> Vec<String> {
    text_rows(
        client,
        "WITH member AS (
                 SELECT d.classid, d.objid FROM pg_depend d
                 JOIN pg_extension e ON e.oid = d.refobjid AND d.refclassid = 'pg_extension'::regclass
                 WHERE e.extname = 'pg_jobqueue' AND d.deptype = 'e'
             ), rel AS (
                 SELECT c.oid, c.relname, c.relkind, c.reloptions FROM pg_class c
                 JOIN member m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
             )
             SELECT 'function ' || p.oid::regprocedure || ': ' || pg_get_functiondef(p.oid)
             FROM pg_proc p JOIN member m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
             UNION ALL
             SELECT 'type ' || t.oid::regtype || ': ' || coalesce(string_agg(en.enumlabel, ',' ORDER BY en.enumsortorder), '')
             FROM pg_type t JOIN member m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
             LEFT JOIN pg_enum en ON en.enumtypid = t.oid GROUP BY t.oid
             UNION ALL
             SELECT format('relation %s (%s) %s', relname, relkind, reloptions) FROM rel
             UNION ALL
             SELECT format('column %s.%s #%s %s not null %s default %s', r.relname, a.attname, a.attnum,
                           format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid))
             FROM rel r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
             LEFT JOIN pg_attrdef ad ON ad.adrelid = r.oid AND ad.adnum = a.attnum
             UNION ALL
             SELECT format('constraint %s.%s %s', r.relname, co.conname, pg_get_constraintdef(co.oid))
             FROM rel r JOIN pg_constraint co ON co.conrelid = r.oid
             UNION ALL
             SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM rel r JOIN pg_index i ON i.indrelid = r.oid
             UNION ALL
             SELECT 'trigger ' || pg_get_triggerdef(t.oid)
             FROM rel r JOIN pg_trigger t ON t.tgrelid = r.oid AND NOT t.tgisinternal
             UNION ALL
             SELECT 'view ' || relname || ': ' || pg_get_viewdef(oid) FROM rel WHERE relkind = 'v'
             UNION ALL
             SELECT format('privileges %s %s', p.oid::regprocedure, p.proacl)
             FROM pg_proc p JOIN member m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
             UNION ALL
             SELECT format('privileges %s %s', c.relname, c.relacl) FROM pg_class c JOIN rel r ON r.oid = c.oid
             UNION ALL
             -- What pg_dump takes for the extension's own privileges, and so leaves out of a dump; a row
             -- that says the object's default is read as no row.
             SELECT format('initial privileges %s %s', pg_describe_object(i.classoid, i.objoid, i.objsubid), i.initprivs)
             FROM pg_init_privs i JOIN member m ON m.classid = i.classoid AND m.objid = i.objoid
             WHERE i.initprivs IS DISTINCT FROM CASE
                 WHEN i.objsubid <> 0 THEN '{}'::aclitem[]
                 WHEN i.classoid = 'pg_proc'::regclass
                     THEN (SELECT acldefault('f', p.proowner) FROM pg_proc p WHERE p.oid = i.objoid)
                 WHEN i.classoid = 'pg_class'::regclass
                     THEN (SELECT acldefault(CASE WHEN c.relkind = 'S' THEN 's' ELSE 'r' END::\"char\", c.relowner)
                           FROM pg_class c WHERE c.oid = i.objoid)
                 WHEN i.classoid = 'pg_type'::regclass
                     THEN (SELECT acldefault('T', t.typowner) FROM pg_type t WHERE t.oid = i.objoid)
             END
             UNION ALL
             SELECT format('dumped %s %s', c::regclass, cond)
             FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(c, cond) WHERE e.extname = 'pg_jobqueue'
             ORDER BY 1",
    )
}

/// From 0.3.0, whose definitions the library refuses until the update (guide, "Upgrading"): after
/// `ALTER EXTENSION pg_jobqueue UPDATE`, every job reads as before and waits for nothing, the
/// leases held across it complete with their tokens, a new job can depend on jobs from before
/// (held until they have succeeded, then claimable, with their results in jq_parent_results), a
/// role granted rights before the update calls the functions 0.4.0 made with them, and the
/// database has exactly the objects of a fresh install given the same rights.
#[test]
fn an_upgrade_from_0_3_0_keeps_every_job_and_lets_new_jobs_depend_on_them() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE DATABASE upgraded").unwrap();
    admin.batch_execute("CREATE DATABASE fresh").unwrap();
    admin.batch_execute("CREATE ROLE producer LOGIN").unwrap();
    // The producer's jobs go into 'kids' and wait for jobs of 'parents' and 'kept' (guide,
    // "Workflows": naming a dependency takes consume or manage on its queue).
    const RIGHTS: &str = "SELECT jq_grant('producer', 'kids', 'enqueue'), jq_grant('producer', 'parents', 'consume'),
                                 jq_grant('producer', 'kept', 'consume')";

    let mut old = connect_as(&cluster, "upgraded", "postgres");
    old.batch_execute("CREATE EXTENSION pg_jobqueue VERSION '0.3.0'").unwrap();
    old.batch_execute(RIGHTS).unwrap();
    let leases = jobs_as_0_3_0(&mut old, "kept");
    let parent: i64 = old
        .query_one(
            "WITH q AS (INSERT INTO jq_queue_ids (queue_name) VALUES ('parents') RETURNING queue_id)
             INSERT INTO jq_live_jobs (queue_id, payload, available_at, max_attempts, created_at)
             SELECT q.queue_id, '{\"kind\": \"parent\"}', now(), 8, now() FROM q
             RETURNING id",
            &[],
        )
        .unwrap()
        .get(0);
    let jobs_0_3_0 = format!("SELECT ({})::text FROM jq_jobs ORDER BY id", job_columns("0.3.0"));
    let jobs = |c: &mut Client| text_rows(c, &jobs_0_3_0);
    let events = |c: &mut Client| text_rows(c, "SELECT e::text FROM jq_job_events e ORDER BY id");
    let (jobs_before, events_before) = (jobs(&mut old), events(&mut old));
    assert_eq!(jobs_before.len(), 18);
    assert_eq!(events_before.len(), 4, "a failure, a death, a cancellation and a snooze");

    // Until the update, a call of 0.3.0's definitions answers 55000, saying what to do, and writes
    // nothing: jq_enqueue's calls the symbol src/upgrade.rs keeps for it, the others the current ones.
    let refused = |client: &mut Client, sql: &str| -> String {
        let error = client.batch_execute(sql).unwrap_err();
        let error = error.as_db_error().unwrap_or_else(|| panic!("{sql}: {error}"));
        format!("{} {} ({})", error.code().code(), error.message(), error.detail().unwrap_or(""))
    };
    const OLDER: &str = "55000 pg_jobqueue's SQL objects in this database are older than its library \
                         (Run ALTER EXTENSION pg_jobqueue UPDATE in this database.)";
    let mut producer = connect_as(&cluster, "upgraded", "producer");
    assert_eq!(refused(&mut producer, "SELECT jq_enqueue('kids', '{}')"), OLDER);
    assert_eq!(refused(&mut producer, "SELECT jq_enqueue_batch('kids', ARRAY['{}']::jsonb[])"), OLDER);
    let (id, token) = leases[0];
    assert_eq!(refused(&mut old, &format!("SELECT jq_complete({id}, 'holder', {token})")), OLDER);
    assert_eq!(refused(&mut old, "SELECT * FROM jq_claim('kept', 'w')"), OLDER);
    assert_eq!(refused(&mut old, "SELECT jq_metrics()"), OLDER, "jq_metrics as every other function");
    assert_eq!(jobs(&mut old), jobs_before, "a refused call wrote nothing");

    old.batch_execute("ALTER EXTENSION pg_jobqueue UPDATE").unwrap();
    let version = text_rows(
        &mut old,
        "SELECT e.extversion FROM pg_extension e
         JOIN pg_available_extensions a ON a.name = e.extname AND a.default_version = e.extversion
         WHERE e.extname = 'pg_jobqueue'",
    );
    assert_eq!(version.len(), 1, "ALTER EXTENSION UPDATE did not reach the current version");
    assert_ne!(version[0], "0.3.0", "this test needs a version after 0.3.0");

    let mut new = connect_as(&cluster, "upgraded", "postgres");
    assert_eq!(jobs(&mut new), jobs_before, "every job reads as before");
    let waiting = "SELECT count(*)::text FROM jq_jobs WHERE depends_on IS NOT NULL OR awaiting <> 0
                   UNION ALL SELECT count(*)::text FROM jq_job_dependencies";
    assert_eq!(text_rows(&mut new, waiting), ["0", "0"], "no job of 0.3.0 waits for another, or is waited for");
    assert_eq!(events(&mut new), events_before, "every event is kept");
    let held_by_dependency = |c: &mut Client| {
        text_rows(c, "SELECT queue_name || ' ' || held_by_dependency FROM jq_queue_stats ORDER BY queue_name")
    };
    assert_eq!(held_by_dependency(&mut new), ["kept 0", "parents 0"]);
    // A queue with jobs of a priority other than 0 is marked so, and its claims walk every priority.
    let priorities = "SELECT queue_name || ' ' || priorities FROM jq_queue_ids
                      WHERE queue_name IN ('kept', 'parents') ORDER BY queue_name";
    assert_eq!(text_rows(&mut new, priorities), ["kept true", "parents false"]);
    let complete = |c: &mut Client, (id, token): (i64, i64), worker: &str| -> bool {
        c.query_one("SELECT jq_complete($1, $2, $3)", &[&id, &worker, &token]).unwrap().get(0)
    };
    assert!(complete(&mut new, leases[0], "holder"), "the lease held across the upgrade completes");

    // A job of the producer's waits for two jobs from before the upgrade: a pending one, and one
    // still running under its lease from before.
    let mut producer = connect_as(&cluster, "upgraded", "producer");
    let after = vec![parent, leases[1].0];
    let child: i64 = producer
        .query_one("SELECT jq_enqueue('kids', '{\"kind\": \"merge\"}', depends_on => $1::bigint[])", &[&after])
        .unwrap()
        .get(0);
    let awaiting =
        |c: &mut Client| text_rows(c, &format!("SELECT awaiting || ' ' || status FROM jq_jobs WHERE id = {child}"));
    assert_eq!(awaiting(&mut new), ["2 pending"]);
    assert_eq!(held_by_dependency(&mut new), ["kept 0", "kids 1", "parents 0"]);
    let claim = |c: &mut Client, queue: &str| -> Vec<(i64, i64)> {
        let rows = c.query("SELECT id, lease_token FROM jq_claim($1, 'w', batch_size => 10)", &[&queue]).unwrap();
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    };
    assert_eq!(claim(&mut new, "kids"), [], "a job is held while it waits");
    assert!(complete(&mut new, leases[1], "holder"), "the other lease from before completes with its token");
    assert_eq!(awaiting(&mut new), ["1 pending"], "and the job waits for one job less");
    assert_eq!(claim(&mut new, "kids"), [], "a job is held until every job it waits for has succeeded");
    let parent_lease = claim(&mut new, "parents");
    assert_eq!(parent_lease.iter().map(|l| l.0).collect::<Vec<_>>(), [parent], "the pending job from before");
    let (_, parent_token) = parent_lease[0];
    let done: bool = new
        .query_one("SELECT jq_complete($1, 'w', $2, result => '{\"sum\": 42}')", &[&parent, &parent_token])
        .unwrap()
        .get(0);
    assert!(done);
    assert_eq!(awaiting(&mut new), ["0 pending"]);
    assert_eq!(claim(&mut new, "kids").iter().map(|l| l.0).collect::<Vec<_>>(), [child], "claimable at last");

    // The rights given before the update reach what 0.4.0 made: jq_parent_results for a right on
    // the job's queue, and jq_enqueue and jq_enqueue_batch, made anew with depends_on.
    let results = text_rows(
        &mut producer,
        &format!(
            "SELECT job_id || ' ' || status || ' ' || coalesce(result::text, 'NULL') FROM jq_parent_results({child})"
        ),
    );
    assert_eq!(results, [format!("{parent} succeeded {{\"sum\": 42}}"), format!("{} succeeded NULL", leases[1].0)]);
    let batch = producer
        .query("SELECT * FROM jq_enqueue_batch('kids', ARRAY['{}']::jsonb[], depends_on => $1)", &[&vec![parent]]);
    assert_eq!(batch.unwrap().len(), 1);

    let mut fresh = connect_as(&cluster, "fresh", "postgres");
    fresh.batch_execute("CREATE EXTENSION pg_jobqueue").unwrap();
    fresh.batch_execute(RIGHTS).unwrap();
    let (upgraded, fresh) = (objects(&mut new), objects(&mut fresh));
    let differences: Vec<_> =
        upgraded.iter().filter(|o| !fresh.contains(o)).chain(fresh.iter().filter(|o| !upgraded.contains(o))).collect();
    assert!(differences.is_empty(), "the upgraded extension differs from a fresh install: {differences:#?}");
}

/// Until `ALTER EXTENSION pg_jobqueue UPDATE`, `jq_metrics()` answers 55000 with what to do, as
/// every other function does, in a database on 0.3.0 with or without jobs (its gauges read views
/// of 0.4.0's columns, which 0.3.0's lack).
#[test]
fn jq_metrics_answers_55000_until_the_update() {
    let cluster = Cluster::start_without_extension(&[]);
    let mut old = cluster.connect();
    old.batch_execute("CREATE EXTENSION pg_jobqueue VERSION '0.3.0'").unwrap();
    let error = old.batch_execute("SELECT jq_metrics()").unwrap_err();
    let error = error.as_db_error().expect("a database error");
    assert_eq!(
        (error.code().code(), error.detail()),
        ("55000", Some("Run ALTER EXTENSION pg_jobqueue UPDATE in this database."))
    );
    old.batch_execute("ALTER EXTENSION pg_jobqueue UPDATE").unwrap();
    let metrics: String = old.query_one("SELECT jq_metrics()", &[]).unwrap().get(0);
    assert!(metrics.contains("jq_stats_available"), "{metrics}");
}

/// From 0.2.0, with a live lease and a role that used the tables directly: after the upgrade the
/// lease is honoured, the role keeps what its table rights let it do, now as rights on every queue,
/// and it has no right on the tables any more.
#[test]
fn an_upgrade_from_0_2_0_moves_table_rights_to_queue_rights_and_keeps_leases() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE DATABASE upgraded").unwrap();
    admin.batch_execute("CREATE ROLE worker LOGIN").unwrap();
    let dsn = |user: &str| {
        cluster.dsn().replace("dbname=postgres", "dbname=upgraded").replace("user=postgres", &format!("user={user}"))
    };
    let mut old = postgres::Client::connect(&dsn("postgres"), postgres::NoTls).unwrap();
    old.batch_execute(
        "CREATE EXTENSION pg_jobqueue VERSION '0.2.0';
         GRANT SELECT, INSERT, UPDATE ON jq_jobs, jq_job_events, jq_queues TO worker;
         GRANT USAGE ON SEQUENCE jq_jobs_id_seq, jq_job_events_id_seq TO worker;
         INSERT INTO jq_queues (queue_name, retention) VALUES ('kept', '10000 years');",
    )
    .unwrap();
    let (id, token) = jobs_as_0_2_0(&mut old, "kept")[0];
    // Until the update, the library refuses the old tables, with what to do.
    let mut worker = postgres::Client::connect(&dsn("worker"), postgres::NoTls).unwrap();
    let refused = worker.batch_execute("SELECT jq_claim('kept', 'w')").unwrap_err();
    let refused = refused.as_db_error().unwrap();
    assert_eq!(refused.code().code(), "55000");
    assert_eq!(refused.detail(), Some("Run ALTER EXTENSION pg_jobqueue UPDATE in this database."));

    // To the current version: the library serves no other (src/rights.rs), so the calls below need it.
    old.batch_execute("ALTER EXTENSION pg_jobqueue UPDATE").unwrap();
    let rights = text_rows(&mut old, "SELECT role || ' ' || queue || ' ' || privilege FROM jq_grants ORDER BY 1");
    // Under 0.2.0 every claim needed UPDATE on jq_queues, which also let workers change settings.
    assert_eq!(rights, ["worker * consume", "worker * enqueue", "worker * manage", "worker * monitor"]);
    let retention: String = old.query_one("SELECT retention::text FROM jq_queues", &[]).unwrap().get(0);
    assert_eq!(retention, "864000:00:00", "a retention out of bounds became the longest allowed");

    // A new session: the old one cached the 0.2.0 definitions' behaviour.
    let mut worker = postgres::Client::connect(&dsn("worker"), postgres::NoTls).unwrap();
    assert!(
        worker.query_one("SELECT jq_complete($1, 'holder', $2)", &[&id, &token]).unwrap().get::<_, bool>(0),
        "the lease from before"
    );
    assert_eq!(worker.query("SELECT * FROM jq_claim('kept', 'w', batch_size => 4)", &[]).unwrap().len(), 4);
    let denied = worker.batch_execute("SELECT count(*) FROM jq_jobs").unwrap_err();
    assert_eq!(denied.code().map(|c| c.code()), Some("42501"), "no table right is left");
    let pending: i64 = old.query_one("SELECT count(*) FROM jq_jobs WHERE status = 'pending'", &[]).unwrap().get(0);
    assert_eq!(pending, 1, "every job is still there");
}

/// Under 0.2.0 `notify` on meant "while someone listens" on a preloaded server and "always" on one
/// that is not; after the upgrade each queue does what it did.
#[test]
fn an_upgrade_from_0_2_0_keeps_what_each_queue_notified() {
    for (settings, was_on) in [(&[][..], "true"), (&["shared_preload_libraries = 'pg_jobqueue'"][..], "NULL")] {
        let cluster = Cluster::start_with(settings);
        let mut admin = cluster.connect();
        admin.batch_execute("CREATE DATABASE upgraded").unwrap();
        let dsn = cluster.dsn().replace("dbname=postgres", "dbname=upgraded");
        let mut old = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
        old.batch_execute(
            "CREATE EXTENSION pg_jobqueue VERSION '0.2.0';
             INSERT INTO jq_queues (queue_name) VALUES ('on');
             INSERT INTO jq_queues (queue_name, notify) VALUES ('off', false);
             ALTER EXTENSION pg_jobqueue UPDATE;",
        )
        .unwrap();
        let notify = text_rows(
            &mut old,
            "SELECT queue_name || ' ' || coalesce(notify::text, 'NULL') FROM jq_queues ORDER BY queue_name",
        );
        assert_eq!(notify, ["off false".to_owned(), format!("on {was_on}")], "preload settings {settings:?}");
    }
}

/// From 0.2.0 with every kind of job: after the upgrade every job reads as it did (jq_jobs has the
/// same columns, now over two tables), every event is kept, the succeeded jobs are in the history
/// and the others in the hot table, a worker holding a lease across the upgrade completes, and a
/// dead job is re-driven with its history.
#[test]
fn an_upgrade_from_0_2_0_moves_every_job_into_the_new_layout() {
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE DATABASE upgraded").unwrap();
    let dsn = cluster.dsn().replace("dbname=postgres", "dbname=upgraded");
    let mut old = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    old.batch_execute("CREATE EXTENSION pg_jobqueue VERSION '0.2.0'").unwrap();
    let leases = jobs_as_0_2_0(&mut old, "q");
    let jobs = |c: &mut Client| text_rows(c, "SELECT j::text FROM jq_jobs j ORDER BY id");
    let events = |c: &mut Client| text_rows(c, "SELECT e::text FROM jq_job_events e ORDER BY id");
    let (jobs_before, events_before) = (jobs(&mut old), events(&mut old));
    assert_eq!(jobs_before.len(), 15);
    assert_eq!(events_before.len(), 3, "a failure, a death and a cancellation");

    // To the current version, whose library the calls below need (src/rights.rs): 0.3.0's script
    // moves the jobs, and the later ones must keep them where it put them.
    old.batch_execute("ALTER EXTENSION pg_jobqueue UPDATE").unwrap();
    let mut new = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    // The columns 0.2.0 had, as its rows read; 0.3.0 adds concurrency_key, NULL for every job of 0.2.0,
    // and 0.4.0 depends_on and awaiting, NULL and 0 (guide, "Workflows").
    let jobs_as_before = text_rows(
        &mut new,
        "SELECT (id, queue_name, payload, status, priority, available_at, attempt_count, max_attempts, lease_owner,
                 lease_token, lease_expires_at, lease_length, claimed_at, run_deadline, last_error_code,
                 last_error_message, dedup_key, ordering_key, created_at, finished_at)::text
         FROM jq_jobs ORDER BY id",
    );
    assert_eq!(jobs_as_before, jobs_before, "every job reads as before");
    assert_eq!(text_rows(&mut new, "SELECT count(*)::text FROM jq_jobs WHERE concurrency_key IS NOT NULL"), ["0"]);
    assert_eq!(
        text_rows(&mut new, "SELECT count(*)::text FROM jq_jobs WHERE depends_on IS NOT NULL OR awaiting <> 0"),
        ["0"],
        "no job of 0.2.0 waits for another"
    );
    assert_eq!(events(&mut new), events_before, "every event is kept");
    let placed = text_rows(
        &mut new,
        "SELECT 'live ' || status || ' ' || count(*) FROM jq_live_jobs GROUP BY status
         UNION ALL SELECT 'history ' || count(*) FROM jq_job_history ORDER BY 1",
    );
    assert_eq!(placed, ["history 6", "live cancelled 1", "live dead 1", "live pending 5", "live running 2"]);
    // A queue that had a job with an ordering key is marked so (src/api/settings.rs): its claims
    // check ordering keys from the first one on.
    assert_eq!(text_rows(&mut new, "SELECT queue_name || ' ' || ordering_keys FROM jq_queue_ids"), ["q true"]);

    for (id, token) in &leases {
        let done: bool = new.query_one("SELECT jq_complete($1, 'holder', $2)", &[id, token]).unwrap().get(0);
        assert!(done, "the lease held across the upgrade completes");
    }
    let in_history: i64 = new
        .query_one(
            "SELECT count(*) FROM jq_job_history WHERE id = ANY($1)",
            &[&leases.iter().map(|l| l.0).collect::<Vec<_>>()],
        )
        .unwrap()
        .get(0);
    assert_eq!(in_history, 2);
    let dead: i64 = new.query_one("SELECT id FROM jq_jobs WHERE status = 'dead'", &[]).unwrap().get(0);
    assert!(new.query_one("SELECT jq_retry($1)", &[&dead]).unwrap().get::<_, bool>(0), "re-drive");
    let history = text_rows(&mut new, &format!("SELECT event FROM jq_job_events WHERE job_id = {dead} ORDER BY id"));
    assert_eq!(history, ["failed", "retried"]);
    let deduped: i64 = new.query_one("SELECT jq_enqueue('q', '{}', dedup_key => 'd1')", &[]).unwrap().get(0);
    let kept: i64 = new.query_one("SELECT id FROM jq_jobs WHERE dedup_key = 'd1'", &[]).unwrap().get(0);
    assert_eq!(deduped, kept, "dedup keys hold across the upgrade");
    // The moved history is in the default partition; retention deletes it when its time comes.
    new.batch_execute("UPDATE jq_job_history SET finished_at = finished_at - interval '8 days' WHERE id < 7").unwrap();
    let pruned: i32 = new.query_one("SELECT jq_prune()", &[]).unwrap().get(0);
    assert_eq!(pruned, 6);
}

/// What a client call answers while the SQL definitions of an older release (0.2.0 or 0.3.0) are in
/// place, as the guide's "Upgrading" says, call by call: 55000, saying what to do. That holds also
/// for the functions whose argument lists a later release extended, whose older definitions call
/// the C symbols `src/upgrade.rs` keeps, and for a call made as the update commits: the commit makes
/// the new definitions visible a moment before it tells the other sessions to forget that theirs
/// were older.
fn answers_under_older(call: &str) -> &'static [&'static str] {
    const OLDER: &str = "55000 pg_jobqueue's SQL objects in this database are older than its library \
                         (Run ALTER EXTENSION pg_jobqueue UPDATE in this database.)";
    match call {
        "jq_claim" | "jq_heartbeat" | "jq_complete" | "jq_enqueue" => &[OLDER],
        _ => unreachable!("no client here calls {call}"),
    }
}

/// What one client thread saw: every failed call, by whether it began before or after
/// `ALTER EXTENSION ... UPDATE` returned, and what its calls did.
#[derive(Default)]
struct Seen {
    /// (function, "SQLSTATE message (detail)") of calls begun before the update returned.
    before: Vec<(&'static str, String)>,
    /// The same for calls begun after it: there must be none.
    after: Vec<(&'static str, String)>,
    /// Jobs this worker claimed and completed.
    completed: Vec<i64>,
    /// Of the two leases it held from before the update: what renewing the first returned (the
    /// first call not refused), then completing it; and what completing the second returned.
    renewed: Option<bool>,
    renewed_completed: Option<bool>,
    completed_at_once: Option<bool>,
    /// Jobs this producer enqueued.
    enqueued: Vec<i64>,
}

impl Seen {
    fn note(&mut self, call: &'static str, after: bool, error: &postgres::Error) {
        let db = error.as_db_error().unwrap_or_else(|| panic!("{call}: not an answer of the server: {error}"));
        let seen = format!("{} {} ({})", db.code().code(), db.message(), db.detail().unwrap_or(""));
        if after { &mut self.after } else { &mut self.before }.push((call, seen));
    }
}

/// The columns of jq_jobs in `version` (0.2.0 or 0.3.0), in its order: its rows as they read.
fn job_columns(version: &str) -> String {
    const COLUMNS_0_2_0: &str = "id, queue_name, payload, status, priority, available_at, attempt_count, max_attempts,
        lease_owner, lease_token, lease_expires_at, lease_length, claimed_at, run_deadline, last_error_code,
        last_error_message, dedup_key, ordering_key, created_at, finished_at";
    match version {
        "0.2.0" => COLUMNS_0_2_0.to_owned(),
        "0.3.0" => format!("{COLUMNS_0_2_0}, concurrency_key, expires_at, progress, result"),
        _ => unreachable!("no test here starts from {version}"),
    }
}

/// Inserts jobs as the functions of `version` (0.2.0 or 0.3.0) left them. `rows` is a SELECT of
/// (queue_name, payload, status, available_at, attempt_count, max_attempts, lease_owner,
/// lease_token, lease_expires_at, lease_length, claimed_at, created_at), typed as the columns are:
/// 0.2.0 keeps them in jq_jobs; 0.3.0 in jq_live_jobs, under the number each queue got from its first
/// enqueue.
fn insert_jobs(client: &mut Client, version: &str, rows: &str) {
    const COLUMNS: &str = "payload, status, available_at, attempt_count, max_attempts, lease_owner, lease_token,
                           lease_expires_at, lease_length, claimed_at, created_at";
    let sql = match version {
        "0.2.0" => format!("INSERT INTO jq_jobs (queue_name, {COLUMNS}) {rows}"),
        "0.3.0" => format!(
            "INSERT INTO jq_queue_ids (queue_name) SELECT DISTINCT r.queue_name FROM ({rows}) AS r(queue_name)
             ON CONFLICT DO NOTHING;
             INSERT INTO jq_live_jobs (queue_id, {COLUMNS})
             SELECT q.queue_id, {COLUMNS} FROM ({rows}) AS r(queue_name, {COLUMNS})
             JOIN jq_queue_ids q USING (queue_name)"
        ),
        _ => unreachable!("no test here starts from {version}"),
    };
    client.batch_execute(&sql).unwrap();
}

/// guide, "Upgrading", from 0.2.0: its script moves every job into new tables while the sessions
/// wait (`update_under_running_workers`).
#[test]
fn an_update_from_0_2_0_under_running_workers_loses_no_job() {
    update_under_running_workers("0.2.0");
}

/// guide, "Upgrading", from 0.3.0, the release before: its script rewrites no job table, but adds
/// columns to the hot table, re-makes its claim indexes under the sessions' claims, and re-makes
/// jq_enqueue, which the producer calls throughout (`update_under_running_workers`).
#[test]
fn an_update_from_0_3_0_under_running_workers_loses_no_job() {
    update_under_running_workers("0.3.0");
}

/// guide, "Upgrading", on a preloaded server whose background worker serves the database, with
/// clients calling throughout. The library installed is already the current one, as after the
/// procedure's first two steps (install, restart), so the sessions here run against the SQL
/// definitions of release `from` until `ALTER EXTENSION pg_jobqueue UPDATE` commits and against the
/// current version's after it, without reconnecting. Four workers each hold two leases taken under
/// `from` (one to renew, one to complete) and claim and complete the queue's jobs; a producer
/// enqueues; a lease that expired before the update waits in a queue nobody claims from.
///
/// Until the update commits, each call fails as the guide says (`answers_under_older`) and writes
/// nothing. After it, every session carries on: the leases from before are renewed and completed
/// with their tokens, the jobs from before and those enqueued since are each granted and completed
/// once (none lost, none twice), another queue's jobs are as they were, and the background worker
/// reaps the expired lease (nothing else does: claims do not reap here, and nobody calls jq_reap).
fn update_under_running_workers(from: &str) {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::Duration;

    let cluster = Cluster::start_with(&[
        "shared_preload_libraries = 'pg_jobqueue'",
        "pg_jobqueue.reaper_databases = 'postgres, upgraded'",
        // No claim reaps, so only the background worker can reap the lease that expired before.
        "pg_jobqueue.inline_reap_max = 0",
    ]);
    cluster.connect().batch_execute("CREATE DATABASE upgraded").unwrap();
    let dsn = cluster.dsn().replace("dbname=postgres", "dbname=upgraded");
    let mut old = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    old.batch_execute(&format!("CREATE EXTENSION pg_jobqueue VERSION '{from}'")).unwrap();
    let kept_leases = match from {
        "0.2.0" => jobs_as_0_2_0(&mut old, "kept"),
        _ => jobs_as_0_3_0(&mut old, "kept"),
    };
    insert_jobs(
        &mut old,
        from,
        "SELECT 'work', jsonb_build_object('n', n), 'pending'::jq_status, now(), 0, 8, NULL::text, 0::bigint,
                NULL::timestamptz, NULL::interval, NULL::timestamptz, now()
         FROM generate_series(1, 200) AS n",
    );
    insert_jobs(
        &mut old,
        from,
        "SELECT 'work', '{\"held\": true}'::jsonb, 'running'::jq_status, now(), 1, 8, 'worker-' || w, 3::bigint,
                now() + interval '1 hour', interval '1 hour', now(), now()
         FROM generate_series(0, 3) AS w, generate_series(1, 2) AS lease",
    );
    insert_jobs(
        &mut old,
        from,
        "SELECT 'abandoned', '{}'::jsonb, 'running'::jq_status, now() - interval '2 minutes', 1, 8, 'lost',
                5::bigint, now() - interval '1 minute', interval '1 minute', now() - interval '2 minutes', now()",
    );
    let ids = |c: &mut Client, sql: &str| -> Vec<i64> { c.query(sql, &[]).unwrap().iter().map(|r| r.get(0)).collect() };
    let jobs_before = ids(&mut old, "SELECT id FROM jq_jobs ORDER BY id");
    let work_before = ids(&mut old, "SELECT id FROM jq_jobs WHERE queue_name = 'work' ORDER BY id");
    let kept_rows = format!("SELECT ({})::text FROM jq_jobs WHERE queue_name = 'kept' ORDER BY id", job_columns(from));
    let kept_before = text_rows(&mut old, &kept_rows);
    let abandoned: i64 = old.query_one("SELECT id FROM jq_jobs WHERE queue_name = 'abandoned'", &[]).unwrap().get(0);

    let (updated, producing, working) =
        (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(true)), Arc::new(AtomicBool::new(true)));
    // Calls each thread has had refused, and jobs enqueued after the update.
    let refusals: Vec<Arc<AtomicUsize>> = (0..5).map(|_| Arc::new(AtomicUsize::new(0))).collect();
    let produced = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (dsn, updated, working, refused) = (dsn.clone(), updated.clone(), working.clone(), refusals[w].clone());
            let name = format!("worker-{w}");
            let held: Vec<(i64, i64)> = old
                .query("SELECT id, lease_token FROM jq_jobs WHERE lease_owner = $1 ORDER BY id", &[&name])
                .unwrap()
                .iter()
                .map(|row| (row.get(0), row.get(1)))
                .collect();
            let (renew, complete) = (held[0], held[1]);
            std::thread::spawn(move || {
                let mut client = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
                let mut seen = Seen::default();
                while working.load(SeqCst) {
                    let after = updated.load(SeqCst);
                    let failed_before = seen.before.len();
                    if seen.renewed != Some(true) {
                        match client.query_one("SELECT jq_heartbeat($1, $2, $3)", &[&renew.0, &name, &renew.1]) {
                            Ok(row) => seen.renewed = Some(row.get(0)),
                            Err(e) => seen.note("jq_heartbeat", after, &e),
                        }
                    } else if seen.renewed_completed.is_none() {
                        match client.query_one("SELECT jq_complete($1, $2, $3)", &[&renew.0, &name, &renew.1]) {
                            Ok(row) => seen.renewed_completed = Some(row.get(0)),
                            Err(e) => seen.note("jq_complete", after, &e),
                        }
                    }
                    if seen.completed_at_once.is_none() {
                        match client.query_one("SELECT jq_complete($1, $2, $3)", &[&complete.0, &name, &complete.1]) {
                            Ok(row) => seen.completed_at_once = Some(row.get(0)),
                            Err(e) => seen.note("jq_complete", after, &e),
                        }
                    }
                    match client.query("SELECT id, lease_token FROM jq_claim('work', $1, batch_size => 5)", &[&name]) {
                        Ok(rows) => {
                            for row in rows {
                                let (id, token): (i64, i64) = (row.get(0), row.get(1));
                                match client.query_one("SELECT jq_complete($1, $2, $3)", &[&id, &name, &token]) {
                                    Ok(done) if done.get::<_, bool>(0) => seen.completed.push(id),
                                    Ok(_) => seen.after.push(("jq_complete", format!("job {id} refused"))),
                                    Err(e) => seen.note("jq_complete", after, &e),
                                }
                            }
                        }
                        Err(e) => seen.note("jq_claim", after, &e),
                    }
                    refused.fetch_add(seen.before.len() - failed_before, SeqCst);
                    std::thread::sleep(Duration::from_millis(10));
                }
                seen
            })
        })
        .collect();
    let producer = {
        let (dsn, updated, producing, refused, produced) =
            (dsn.clone(), updated.clone(), producing.clone(), refusals[4].clone(), produced.clone());
        std::thread::spawn(move || {
            let mut client = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
            let mut seen = Seen::default();
            while producing.load(SeqCst) {
                let after = updated.load(SeqCst);
                match client.query_one("SELECT jq_enqueue('work', '{\"produced\": true}')", &[]) {
                    Ok(row) => {
                        seen.enqueued.push(row.get(0));
                        if after {
                            produced.fetch_add(1, SeqCst);
                        }
                    }
                    Err(e) => {
                        seen.note("jq_enqueue", after, &e);
                        refused.fetch_add(1, SeqCst);
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            seen
        })
    };

    // Every thread has run against the definitions of 0.2.0 before the update starts.
    wait_until("every client has had calls refused", || refusals.iter().all(|r| r.load(SeqCst) >= 3));
    old.batch_execute("ALTER EXTENSION pg_jobqueue UPDATE").unwrap();
    updated.store(true, SeqCst);
    wait_until("the producer has enqueued 20 jobs after the update", || produced.load(SeqCst) >= 20);
    producing.store(false, SeqCst);
    let producer = producer.join().unwrap();
    let mut new = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    wait_until("the workers have drained the queue", || {
        ids(&mut new, "SELECT id FROM jq_jobs WHERE queue_name = 'work' AND status <> 'succeeded'").is_empty()
    });
    working.store(false, SeqCst);
    let workers: Vec<Seen> = workers.into_iter().map(|w| w.join().unwrap()).collect();

    // Each thread's first call of each function was made before the update began, and answered as
    // the README says of the old definitions; later ones may have been made as it committed.
    let mut called = std::collections::BTreeSet::new();
    for seen in workers.iter().chain([&producer]) {
        assert!(seen.after.is_empty(), "a call made after the update failed: {:?}", seen.after);
        let mut first = std::collections::BTreeSet::new();
        for (call, refused) in &seen.before {
            let answers = answers_under_older(call);
            if first.insert(*call) {
                assert_eq!(refused, answers[0], "the first {call} under 0.2.0's definitions");
            }
            assert!(answers.contains(&refused.as_str()), "{call} under 0.2.0's definitions: {refused}");
        }
        called.extend(first);
    }
    assert_eq!(called, ["jq_claim", "jq_complete", "jq_enqueue", "jq_heartbeat"].into(), "each call was refused");
    for (w, seen) in workers.iter().enumerate() {
        let held = (seen.renewed, seen.renewed_completed, seen.completed_at_once);
        assert_eq!(
            held,
            (Some(true), Some(true), Some(true)),
            "worker-{w}'s leases from before the update, by their tokens"
        );
    }
    let held = text_rows(
        &mut new,
        "SELECT status || ' ' || lease_token || ' ' || attempt_count FROM jq_jobs WHERE payload = '{\"held\": true}'",
    );
    assert_eq!(held, ["succeeded 3 1"; 8]);

    // Every job of the queue, from before and since, was granted once and completed once.
    let mut completed: Vec<i64> = workers.iter().flat_map(|s| s.completed.iter().copied()).collect();
    completed.sort_unstable();
    let granted = completed.len();
    completed.dedup();
    assert_eq!(completed.len(), granted, "a job was granted twice");
    let held_ids = ids(&mut new, "SELECT id FROM jq_jobs WHERE payload = '{\"held\": true}'");
    let mut expected: Vec<i64> =
        work_before.iter().chain(&producer.enqueued).copied().filter(|id| !held_ids.contains(id)).collect();
    expected.sort_unstable();
    assert_eq!(completed, expected, "every job of the queue was completed, and no other");
    let claimed_again = ids(&mut new, "SELECT id FROM jq_jobs WHERE queue_name = 'work' AND attempt_count <> 1");
    assert!(claimed_again.is_empty(), "jobs claimed more than once: {claimed_again:?}");
    let jobs_after = ids(&mut new, "SELECT id FROM jq_jobs ORDER BY id");
    let mut jobs_expected: Vec<i64> = jobs_before.iter().chain(&producer.enqueued).copied().collect();
    jobs_expected.sort_unstable();
    assert_eq!(jobs_after, jobs_expected, "no job lost, none there twice");

    // The other queue as `from` left it, read in the columns it had; its leases complete now.
    assert_eq!(text_rows(&mut new, &kept_rows), kept_before);
    for (id, token) in &kept_leases {
        assert!(new.query_one("SELECT jq_complete($1, 'holder', $2)", &[id, token]).unwrap().get::<_, bool>(0));
    }
    // The background worker serves the upgraded database again.
    wait_until("the background worker reaps the lease that expired before the update", || {
        !ids(
            &mut new,
            &format!("SELECT job_id FROM jq_job_events WHERE job_id = {abandoned} AND event = 'lease_expired'"),
        )
        .is_empty()
    });
}
