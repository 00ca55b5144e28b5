//! pg_dump keeps the queue: jobs, settings, history and the id sequences survive a dump and restore
//! into another database, and ids are not reused afterwards.

use std::process::Command;

use jq_harness::{pg_dir, text_rows, Cluster};

#[test]
fn a_dump_and_restore_keeps_jobs_settings_history_and_ids() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "INSERT INTO jq_queues (queue_name, max_attempts, concurrency_limit) VALUES ('kept', 3, 2);
             SELECT jq_enqueue_batch('kept', array_fill('{\"x\": 1}'::jsonb, ARRAY[5]));
             SELECT jq_enqueue('kept', '{}', priority => 9, max_attempts => 1, dedup_key => 'once');",
        )
        .unwrap();
    let (id, token): (i64, i64) = {
        let row = client.query_one("SELECT id, lease_token FROM jq_claim('kept', 'w', batch_size => 1)", &[]).unwrap();
        (row.get(0), row.get(1))
    };
    client
        .query_one("SELECT jq_fail($1, 'w', $2, 'BOOM', 'kept in history', retryable => false)", &[&id, &token])
        .unwrap();
    // History in a day partition (made by jq_prune after installation, so not the extension's own)
    // and in the default partition (a job that finished before the day existed).
    let (early, early_token): (i64, i64) = {
        let row = client.query_one("SELECT id, lease_token FROM jq_claim('kept', 'w')", &[]).unwrap();
        (row.get(0), row.get(1))
    };
    client.query_one("SELECT jq_complete($1, 'w', $2)", &[&early, &early_token]).unwrap();
    client
        .batch_execute("UPDATE jq_job_history SET finished_at = finished_at - interval '3 days'; SELECT jq_prune();")
        .unwrap();
    let (late, late_token): (i64, i64) = {
        let row = client.query_one("SELECT id, lease_token FROM jq_claim('kept', 'w')", &[]).unwrap();
        (row.get(0), row.get(1))
    };
    client.query_one("SELECT jq_complete($1, 'w', $2)", &[&late, &late_token]).unwrap();
    let places = |c: &mut jq_harness::Client| -> Vec<String> {
        text_rows(c, "SELECT tableoid::regclass || ' ' || count(*) FROM jq_job_history GROUP BY tableoid ORDER BY 1")
    };
    let placed = places(&mut client);
    assert_eq!(placed.len(), 2, "{placed:?}");
    assert!(placed[0].starts_with("jq_job_history_2") && placed[1] == "jq_job_history_default 1", "{placed:?}");
    let snapshot = |c: &mut jq_harness::Client| -> Vec<String> {
        text_rows(
            c,
            "SELECT format('%s|%s|%s|%s|%s', id, status, payload, attempt_count, coalesce(dedup_key, '')) FROM jq_jobs
             UNION ALL SELECT format('event|%s|%s|%s', job_id, event, error_message) FROM jq_job_events
             UNION ALL SELECT format('queue|%s|%s|%s', queue_name, max_attempts, concurrency_limit) FROM jq_queues
             ORDER BY 1",
        )
    };
    let before = snapshot(&mut client);
    let max_id: i64 = client.query_one("SELECT max(id) FROM jq_jobs", &[]).unwrap().get(0);

    let dump = std::env::temp_dir().join(format!("jq-backup-{}.dump", std::process::id()));
    let port = cluster.port().to_string();
    let connection = ["-h", "127.0.0.1", "-p", port.as_str(), "-U", "postgres"];
    let dumped = Command::new(pg_dir().join("bin/pg_dump"))
        .args(connection)
        .args(["-Fc", "-f"])
        .arg(&dump)
        .arg("postgres")
        .status()
        .unwrap();
    assert!(dumped.success(), "pg_dump failed");
    client.batch_execute("CREATE DATABASE restored").unwrap();
    let restored = Command::new(pg_dir().join("bin/pg_restore"))
        .args(connection)
        .args(["--exit-on-error", "-d", "restored"])
        .arg(&dump)
        .status()
        .unwrap();
    let _ = std::fs::remove_file(&dump);
    assert!(restored.success(), "pg_restore failed");

    let dsn = cluster.dsn().replace("dbname=postgres", "dbname=restored");
    let mut restored = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    assert_eq!(snapshot(&mut restored), before, "the restored queue differs");
    assert_eq!(places(&mut restored), placed, "the days of history are restored as they were");
    let next: i64 = restored.query_one("SELECT jq_enqueue('kept', '{}')", &[]).unwrap().get(0);
    assert!(next > max_id, "a job id was reused after the restore");
    let again: i64 = restored.query_one("SELECT jq_enqueue('kept', '{}', dedup_key => 'once')", &[]).unwrap().get(0);
    assert!(again > max_id, "the dead job no longer holds its dedup key, so a new job is made");
}
