//! Upgrades in place: a database on an earlier release (its frozen install script in sql/released)
//! holds jobs, is upgraded with `ALTER EXTENSION pg_jobqueue UPDATE`, keeps its jobs and leases, and
//! then has exactly the objects of a fresh install of the current version.
//!
//! The library installed is always the current one, and it refuses to serve the tables of an older
//! release; so the jobs of before the upgrade are written here as that release's functions left
//! them (`jobs_as_0_2_0`), leases included.

use jq_harness::{text_rows, Client, Cluster};

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
/// constraints, indexes, views, sequences, types, privileges, and what pg_dump keeps.
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
             SELECT 'view ' || relname || ': ' || pg_get_viewdef(oid) FROM rel WHERE relkind = 'v'
             UNION ALL
             SELECT format('privileges %s %s', p.oid::regprocedure, p.proacl)
             FROM pg_proc p JOIN member m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
             UNION ALL
             SELECT format('privileges %s %s', c.relname, c.relacl) FROM pg_class c JOIN rel r ON r.oid = c.oid
             UNION ALL
             SELECT format('dumped %s %s', c::regclass, cond)
             FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(c, cond) WHERE e.extname = 'pg_jobqueue'
             ORDER BY 1",
    )
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

    old.batch_execute("ALTER EXTENSION pg_jobqueue UPDATE TO '0.3.0'").unwrap();
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
             ALTER EXTENSION pg_jobqueue UPDATE TO '0.3.0';",
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

    old.batch_execute("ALTER EXTENSION pg_jobqueue UPDATE TO '0.3.0'").unwrap();
    let mut new = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    // The columns 0.2.0 had, as its rows read; 0.3.0 adds concurrency_key, NULL for every job of 0.2.0.
    let jobs_as_before = text_rows(
        &mut new,
        "SELECT (id, queue_name, payload, status, priority, available_at, attempt_count, max_attempts, lease_owner,
                 lease_token, lease_expires_at, lease_length, claimed_at, run_deadline, last_error_code,
                 last_error_message, dedup_key, ordering_key, created_at, finished_at)::text
         FROM jq_jobs ORDER BY id",
    );
    assert_eq!(jobs_as_before, jobs_before, "every job reads as before");
    assert_eq!(text_rows(&mut new, "SELECT count(*)::text FROM jq_jobs WHERE concurrency_key IS NOT NULL"), ["0"]);
    assert_eq!(events(&mut new), events_before, "every event is kept");
    let placed = text_rows(
        &mut new,
        "SELECT 'live ' || status || ' ' || count(*) FROM jq_live_jobs GROUP BY status
         UNION ALL SELECT 'history ' || count(*) FROM jq_job_history ORDER BY 1",
    );
    assert_eq!(placed, ["history 6", "live cancelled 1", "live dead 1", "live pending 5", "live running 2"]);

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
