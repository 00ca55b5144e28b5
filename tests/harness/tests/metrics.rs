//! Operating figures: the shared-memory counters and latency histograms (library preloaded), the
//! Prometheus text of jq_metrics() checked by a real parser, and what a pg_monitor member may do.

use std::process::Command;

use jq_harness::client::claim;
use jq_harness::{text_rows, Client, Cluster};
use postgres::error::SqlState;
use postgres::NoTls;

/// Preloaded, with nothing that reaps on its own: the script below says when leases expire.
const SCRIPTED: [&str; 3] =
    ["shared_preload_libraries = 'pg_jobqueue'", "pg_jobqueue.reaper_enabled = off", "pg_jobqueue.inline_reap_max = 0"];

fn counters(client: &mut Client, queue: &str) -> Vec<i64> {
    let row = client
        .query_one(
            "SELECT claims, completions, failures, retries, deaths, lease_expirations, stale_completions,
                    stale_heartbeats, cancellations
             FROM jq_queue_counters() WHERE queue_name = $1",
            &[&queue],
        )
        .unwrap();
    (0..9).map(|i| row.get(i)).collect()
}

fn call_bool(client: &mut Client, sql: &str, id: i64, token: i64) -> bool {
    client.query_one(sql, &[&id, &token]).unwrap().get(0)
}

#[test]
fn counters_move_exactly_as_a_scripted_sequence_says() {
    let cluster = Cluster::start_with(&SCRIPTED);
    let mut c = cluster.connect();
    c.batch_execute("SELECT jq_enqueue_batch('ops', array_fill('{}'::jsonb, ARRAY[6]))").unwrap();

    let (a, ta) = claim(&mut c, "ops", "w", "1 min").unwrap();
    let (b, tb) = claim(&mut c, "ops", "w", "1 min").unwrap();
    let (d, td) = claim(&mut c, "ops", "w", "1 min").unwrap();
    let (e, te) = claim(&mut c, "ops", "w", "1 min").unwrap();
    assert!(call_bool(&mut c, "SELECT jq_complete($1, 'w', $2)", a, ta));
    assert!(!call_bool(&mut c, "SELECT jq_complete($1, 'w', $2)", a, ta), "a second completion");
    assert!(call_bool(&mut c, "SELECT jq_fail($1, 'w', $2, 'TIMEOUT')", b, tb));
    assert!(call_bool(&mut c, "SELECT jq_fail($1, 'w', $2, 'BAD \"payload\"', retryable => false)", d, td));
    assert!(!call_bool(&mut c, "SELECT jq_heartbeat($1, 'w', $2::bigint + 1)", e, te), "a stale token");
    assert!(!call_bool(&mut c, "SELECT jq_fail($1, 'w', $2::bigint + 1, 'LATE')", e, te), "a stale token");
    assert!(c.query_one("SELECT jq_cancel($1)", &[&e]).unwrap().get::<_, bool>(0));
    // A claim that rolls back counts nothing.
    c.batch_execute("BEGIN; SELECT count(*) FROM jq_claim('ops', 'w'); ROLLBACK").unwrap();
    // A lease that expires and is reaped: an expiration, and a retry.
    let (_, _) = claim(&mut c, "ops", "w", "100 ms").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert_eq!(c.query_one("SELECT jq_reap()", &[]).unwrap().get::<_, i32>(0), 1);
    // A batch completion of one current and one stale lease.
    let (f, tf) = claim(&mut c, "ops", "w", "1 min").unwrap();
    let done = c
        .query(
            "SELECT id FROM jq_complete_batch(ARRAY[$1::bigint, $2::bigint], 'w', ARRAY[$3::bigint, $4::bigint])",
            &[&f, &a, &tf, &ta],
        )
        .unwrap();
    assert_eq!(done.len(), 1);

    // claims, completions, failures, retries, deaths, expirations, stale completions, stale
    // heartbeats, cancellations.
    assert_eq!(counters(&mut c, "ops"), vec![6, 2, 2, 2, 1, 1, 3, 1, 1]);
    let codes = text_rows(
        &mut c,
        "SELECT coalesce(error_code, '(other)') || '=' || failures FROM jq_failure_counts()
         WHERE queue_name = 'ops' ORDER BY 1",
    );
    assert_eq!(codes, ["BAD \"payload\"=1", "TIMEOUT=1"]);

    c.batch_execute("SELECT jq_stats_reset()").unwrap();
    assert_eq!(counters(&mut c, "ops"), vec![0; 9]);
    let since: bool = c
        .query_one("SELECT counted_since > now() - interval '1 minute' FROM jq_queue_counters() LIMIT 1", &[])
        .unwrap()
        .get(0);
    assert!(since, "the reset time moved");
}

/// The counters tell what committed, and a transaction commits without what its rolled-back
/// savepoints and PL/pgSQL exception blocks did.
#[test]
fn what_a_rolled_back_savepoint_did_is_not_counted() {
    let cluster = Cluster::start_with(&SCRIPTED);
    let mut c = cluster.connect();
    c.batch_execute("SELECT jq_enqueue_batch('sub', array_fill('{}'::jsonb, ARRAY[4]))").unwrap();

    c.batch_execute("BEGIN; SAVEPOINT a; SELECT count(*) FROM jq_claim('sub', 'w'); ROLLBACK TO a; COMMIT").unwrap();
    // A released savepoint inside one that rolls back goes with it.
    c.batch_execute(
        "BEGIN; SAVEPOINT a; SAVEPOINT b; SELECT count(*) FROM jq_claim('sub', 'w'); RELEASE b; ROLLBACK TO a; COMMIT",
    )
    .unwrap();
    c.batch_execute(
        "DO $$ BEGIN BEGIN PERFORM jq_claim('sub', 'w'); RAISE EXCEPTION 'undo';
         EXCEPTION WHEN raise_exception THEN NULL; END; END $$",
    )
    .unwrap();
    // Nothing committed, so the queue is not even listed.
    let listed = c.query_opt("SELECT 1 FROM jq_queue_counters() WHERE queue_name = 'sub'", &[]).unwrap();
    assert!(listed.is_none(), "rolled-back claims were counted: {:?}", counters(&mut c, "sub"));

    // A released savepoint counts with its transaction.
    c.batch_execute("BEGIN; SAVEPOINT a; SELECT count(*) FROM jq_claim('sub', 'w'); RELEASE a; COMMIT").unwrap();
    let (id, token): (i64, i64) = {
        let row = c.query_one("SELECT id, lease_token FROM jq_jobs WHERE status = 'running'", &[]).unwrap();
        (row.get(0), row.get(1))
    };
    let undone = [
        "SELECT jq_complete($1, 'w', $2)",
        "SELECT jq_fail($1, 'w', $2, 'E')",
        "SELECT jq_fail($1, 'w', $2, 'E', retryable => false)",
        "SELECT jq_heartbeat($1, 'w', $2::bigint + 1)",
        "SELECT jq_cancel($1) WHERE $2::bigint IS NOT NULL",
    ];
    for call in undone {
        let mut tx = c.transaction().unwrap();
        let mut savepoint = tx.savepoint("s").unwrap();
        savepoint.query(call, &[&id, &token]).unwrap();
        savepoint.rollback().unwrap();
        tx.commit().unwrap();
    }
    assert_eq!(counters(&mut c, "sub"), vec![1, 0, 0, 0, 0, 0, 0, 0, 0], "{undone:?} were counted");
    assert!(call_bool(&mut c, "SELECT jq_complete($1, 'w', $2)", id, token));
    assert_eq!(counters(&mut c, "sub"), vec![1, 1, 0, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn latency_percentiles_match_constructed_waits_and_run_times() {
    let cluster = Cluster::start_with(&SCRIPTED);
    let mut c = cluster.connect();
    // 20 jobs that became available 10 s ago.
    c.batch_execute(
        "SELECT jq_enqueue_batch('lat', array_fill('{}'::jsonb, ARRAY[20]));
         UPDATE jq_live_jobs SET available_at = clock_timestamp() - interval '10 s'
         WHERE id IN (SELECT id FROM jq_jobs WHERE queue_name = 'lat');
         SELECT count(*) FROM jq_claim('lat', 'w', batch_size => 20);
         -- Run times: 18 jobs of 3 s and 2 of 30 s, by moving their claim times back.
         UPDATE jq_live_jobs SET claimed_at = clock_timestamp() - interval '3 s'
         WHERE id IN (SELECT id FROM jq_jobs WHERE queue_name = 'lat' ORDER BY id LIMIT 18);
         UPDATE jq_live_jobs SET claimed_at = clock_timestamp() - interval '30 s'
         WHERE id IN (SELECT id FROM jq_jobs WHERE queue_name = 'lat') AND claimed_at > clock_timestamp() - interval '2 s';
         SELECT count(*) FROM jq_jobs j, LATERAL jq_complete(j.id, 'w', j.lease_token) WHERE j.queue_name = 'lat';",
    )
    .unwrap();
    let row = c
        .query_one(
            "SELECT wait_p50_seconds, wait_p95_seconds, wait_p99_seconds, run_p50_seconds, run_p95_seconds,
                    run_p99_seconds, completions
             FROM jq_queue_counters() WHERE queue_name = 'lat'",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, i64>(6), 20);
    // The histogram's buckets are 2^(1/4) apart: an estimate lies within that factor of the truth.
    let near = |estimate: f64, truth: f64| estimate >= truth / 1.19 && estimate <= truth * 1.19;
    for (i, truth) in [(0, 10.0), (1, 10.0), (2, 10.0), (3, 3.0), (5, 30.0)] {
        let estimate: f64 = row.get(i);
        assert!(near(estimate, truth), "column {i}: {estimate} s, constructed {truth} s");
    }
    let metrics: String = c.query_one("SELECT jq_metrics()", &[]).unwrap().get(0);
    assert!(metrics.contains("jq_run_seconds_count{queue=\"lat\"} 20\n"), "{metrics}");
    assert!(metrics.contains("jq_wait_seconds_bucket{queue=\"lat\",le=\"+Inf\"} 20\n"), "{metrics}");
}

/// Parses `text` with the prometheus_client package's parser (Debian's python3-prometheus-client)
/// and returns "family type samples" lines.
fn parse_exposition(text: &str) -> Vec<String> {
    let script = r#"
import sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(sys.stdin.read()):
    print(family.name, family.type, len(family.samples))
"#;
    let mut child = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

#[test]
fn jq_metrics_is_valid_prometheus_exposition_and_never_shows_a_payload() {
    let cluster = Cluster::start_with(&SCRIPTED);
    let mut c = cluster.connect();
    c.batch_execute(
        r#"SELECT jq_enqueue('mail', '{"secret": "hunter2"}');
           SELECT jq_enqueue('mail', '{"secret": "hunter2"}');
           SELECT jq_enqueue('sms', '{}', run_at => clock_timestamp() + interval '1 hour');
           SELECT jq_fail(id, 'w', lease_token, E'odd "code" \\ with\nnewline') FROM jq_claim('mail', 'w');
           SELECT jq_complete(id, 'w', lease_token) FROM jq_claim('mail', 'w');"#,
    )
    .unwrap();
    let text: String = c.query_one("SELECT jq_metrics()", &[]).unwrap().get(0);
    assert!(!text.contains("hunter2"), "a payload in the metrics");
    let families = parse_exposition(&text);
    for expected in [
        "jq_claims counter",
        "jq_failures_by_code counter",
        "jq_wait_seconds histogram",
        "jq_run_seconds histogram",
        "jq_jobs gauge",
        "jq_oldest_claimable_age_seconds gauge",
        "jq_health_warning gauge",
    ] {
        assert!(families.iter().any(|f| f.starts_with(expected)), "no {expected} in {families:?}");
    }
    assert!(text.contains("jq_claims_total{queue=\"mail\"} 2\n"), "{text}");
    assert!(text.contains("jq_jobs{queue=\"sms\",status=\"scheduled\"} 1\n"), "{text}");
    assert!(text.contains(r#"error_code="odd \"code\" \\ with\nnewline"} 1"#), "{text}");

    // Without preload: no counters, and still valid.
    let plain = Cluster::start();
    let text: String = plain.connect().query_one("SELECT jq_metrics()", &[]).unwrap().get(0);
    assert!(text.contains("jq_stats_available 0\n"));
    parse_exposition(&text);
}

#[test]
fn a_monitoring_role_reads_metrics_and_nothing_else() {
    let cluster = Cluster::start_with(&SCRIPTED);
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
             SELECT jq_enqueue('q', '{}');",
        )
        .unwrap();
    let mut watcher =
        Client::connect(&format!("host=127.0.0.1 port={} user=watcher dbname=postgres", cluster.port()), NoTls)
            .unwrap();
    for readable in [
        "SELECT jq_metrics()",
        "SELECT * FROM jq_queue_stats",
        "SELECT * FROM jq_queue_health",
        "SELECT * FROM jq_queue_counters()",
        "SELECT * FROM jq_failure_counts()",
    ] {
        watcher.query(readable, &[]).unwrap_or_else(|e| panic!("{readable}: {e}"));
    }
    for refused in [
        "SELECT * FROM jq_jobs",
        "SELECT * FROM jq_job_events",
        "SELECT jq_enqueue('q', '{}')",
        "SELECT * FROM jq_claim('q', 'w')",
        "SELECT jq_complete(1, 'w', 1)",
        "SELECT jq_cancel(1)",
        "SELECT jq_reap()",
        "SELECT jq_stats_reset()",
        "UPDATE jq_queues SET paused = true",
    ] {
        let error = watcher.query(refused, &[]).expect_err(refused);
        assert_eq!(error.code(), Some(&SqlState::INSUFFICIENT_PRIVILEGE), "{refused}: {error}");
    }
}
