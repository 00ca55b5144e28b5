//! Upgrades in place: a database on the first release (its frozen install script in sql/released)
//! takes jobs, is upgraded with `ALTER EXTENSION pg_jobqueue UPDATE`, keeps its jobs and leases, and
//! then has exactly the objects of a fresh install of the current version.

use jq_harness::{text_rows, Client, Cluster};

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
    old.batch_execute(
        "INSERT INTO jq_queues (queue_name, max_attempts) VALUES ('kept', 3);
         SELECT jq_enqueue_batch('kept', array_fill('{\"x\": 1}'::jsonb, ARRAY[3]));",
    )
    .unwrap();
    let row = old.query_one("SELECT id, lease_token FROM jq_claim('kept', 'w', interval '1 hour')", &[]).unwrap();
    let (id, token): (i64, i64) = (row.get(0), row.get(1));

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

    // The lease taken before the upgrade is honoured after it, by a function the upgrade added.
    let completed: Vec<i64> = old
        .query("SELECT * FROM jq_complete_batch(ARRAY[$1::bigint], 'w', ARRAY[$2::bigint])", &[&id, &token])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(completed, vec![id]);
    let pending: i64 = old.query_one("SELECT count(*) FROM jq_jobs WHERE status = 'pending'", &[]).unwrap().get(0);
    assert_eq!(pending, 2, "the other jobs of the old version are still there");

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
    let mut worker = postgres::Client::connect(&dsn("worker"), postgres::NoTls).unwrap();
    worker.batch_execute("SELECT jq_enqueue_batch('kept', array_fill('{}'::jsonb, ARRAY[3]))").unwrap();
    let row = worker.query_one("SELECT id, lease_token FROM jq_claim('kept', 'w', interval '1 hour')", &[]).unwrap();
    let (id, token): (i64, i64) = (row.get(0), row.get(1));

    old.batch_execute("ALTER EXTENSION pg_jobqueue UPDATE TO '0.3.0'").unwrap();
    let rights = text_rows(&mut old, "SELECT role || ' ' || queue || ' ' || privilege FROM jq_grants ORDER BY 1");
    // Under 0.2.0 every claim needed UPDATE on jq_queues, which also let workers change settings.
    assert_eq!(rights, ["worker * consume", "worker * enqueue", "worker * manage", "worker * monitor"]);
    let retention: String = old.query_one("SELECT retention::text FROM jq_queues", &[]).unwrap().get(0);
    assert_eq!(retention, "864000:00:00", "a retention out of bounds became the longest allowed");

    // A new session: the old one cached the 0.2.0 definitions' behaviour.
    let mut worker = postgres::Client::connect(&dsn("worker"), postgres::NoTls).unwrap();
    assert!(
        worker.query_one("SELECT jq_complete($1, 'w', $2)", &[&id, &token]).unwrap().get::<_, bool>(0),
        "the lease from before"
    );
    assert_eq!(worker.query("SELECT * FROM jq_claim('kept', 'w')", &[]).unwrap().len(), 1);
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
