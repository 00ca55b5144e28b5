//! Every statement of dashboard/sql, explained with representative parameters as a role with
//! `manage` on every queue, over a database with a history of succeeded jobs: none may read a
//! history partition that holds rows but by a job's id (no sequential scan, no range of a queue's
//! history). The dashboard's pages then cost what
//! the live jobs cost, not what the history kept costs. A queue's succeeded jobs are listed by
//! jq_list_jobs (queue_jobs.sql), which reads a page of the queue's range of each day, and whose
//! own statements the extension's plan tests check (job_listings_read_the_queues_entries_alone).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use jq_harness::client::connect_as;
use jq_harness::{Client, Cluster};
use postgres::types::ToSql;

/// The parameters each file is explained with; a file missing here fails the test, so a new
/// statement is explained too.
fn parameters(file: &str, live_job: i64, dead_job: i64) -> Option<Vec<Box<dyn ToSql + Sync>>> {
    let none: Option<String> = None;
    Some(match file {
        "session" | "access" | "overview" | "counters" | "backlog" | "schedules" | "failure_counts" | "metrics"
        | "databases" => {
            vec![]
        }
        "queue_figures" | "queue_settings" | "held_keys" => vec![Box::new("q7")],
        "has_right" => vec![Box::new("q7"), Box::new("manage")],
        "queue_jobs" => vec![
            Box::new("q7"),
            Box::new(Some("succeeded")),
            Box::new(none.clone()),
            Box::new(none.clone()),
            Box::new(none),
            Box::new(51i64),
            Box::new(0i64),
        ],
        "finished_ids" => vec![Box::new(Some(vec!["q7".to_owned()])), Box::new(5000i64)],
        "finished_jobs" => vec![
            Box::new(vec![dead_job, live_job]),
            Box::new(vec!["dead", "cancelled"]),
            Box::new(Some("k1")),
            Box::new(Some("BOOM")),
            Box::new(Some("1 hour")),
        ],
        "job" | "job_events" | "job_parents" | "retry" | "cancel" | "purge" => {
            vec![Box::new(dead_job)]
        }
        "pause" => vec![Box::new("q7"), Box::new(true)],
        "retry_dead" | "purge_dead" => vec![Box::new("q7"), Box::new(Some("BOOM")), Box::new(1i32)],
        "schedule_pause" | "schedule_resume" => vec![Box::new("nightly")],
        _ => return None,
    })
}

/// 40 queues of 500 succeeded jobs each in today's partition, 5,000 more in the default partition
/// (as a database without maintenance has them), and live jobs of every status.
fn fill(client: &mut Client) -> (i64, i64) {
    client
        .batch_execute(
            "SELECT jq_prune();
             SELECT count(*) FROM generate_series(1, 40) q,
                    LATERAL jq_enqueue_batch('q' || q, array_fill('{}'::jsonb, ARRAY[500]));
             DO $$
             DECLARE r record;
             BEGIN
                 FOR r IN SELECT 'q' || q AS name FROM generate_series(1, 40) q LOOP
                     PERFORM jq_complete(c.id, 'w', c.lease_token) FROM jq_claim(r.name, 'w', NULL, 500) c;
                 END LOOP;
             END $$;
             INSERT INTO jq_job_history (id, queue_id, payload, priority, available_at, attempt_count, max_attempts,
                                         lease_token, created_at, finished_at)
             SELECT nextval('jq_jobs_id_seq'), 1 + i % 40, '{}', 0, '2000-01-01', 1, 8, 1, '2000-01-01',
                    '2000-01-01'::timestamptz + i * interval '1 second'
             FROM generate_series(1, 5000) i;
             SELECT count(*) FROM generate_series(1, 40) q,
                    LATERAL jq_enqueue_batch('q' || q, array_fill('{}'::jsonb, ARRAY[50]));
             SELECT jq_enqueue('q7', '{}', concurrency_key => 'k1') FROM generate_series(1, 5);
             SELECT jq_schedule('nightly', '0 3 * * *', 'q7', '{}');",
        )
        .unwrap();
    let claimed = client.query("SELECT id, lease_token FROM jq_claim('q7', 'w', NULL, 3)", &[]).unwrap();
    let (dead, token): (i64, i64) = (claimed[0].get(0), claimed[0].get(1));
    client.execute("SELECT jq_fail($1, 'w', $2, 'BOOM', 'it broke', retryable => false)", &[&dead, &token]).unwrap();
    let cancelled: i64 = claimed[1].get(0);
    client.execute("SELECT jq_cancel($1)", &[&cancelled]).unwrap();
    let live: i64 = claimed[2].get(0);
    client.batch_execute("ANALYZE").unwrap();
    (live, dead)
}

/// The first scan of a history partition that holds rows other than an index probe by job id (or
/// the NULL probe of finished_at, which finds nothing there): a sequential scan, or an index range
/// over a queue's history.
fn history_read(plan: &[String], history: &BTreeSet<String>) -> Option<String> {
    for (at, line) in plan.iter().enumerate() {
        let Some(part) = history.iter().find(|part| line.contains(&format!(" on {part} "))) else {
            continue;
        };
        if line.contains("Seq Scan") {
            return Some(format!("sequential scan of {part}"));
        }
        let condition = plan[at + 1..]
            .iter()
            .take_while(|detail| !detail.contains("->"))
            .find(|detail| detail.contains("Index Cond:") || detail.contains("Recheck Cond:"));
        let by_id = condition.is_some_and(|c| c.contains("(id = ") || c.contains("finished_at IS NULL"));
        if !by_id {
            return Some(format!("{} of {part}", line.trim()));
        }
    }
    None
}

#[test]
fn no_statement_scans_the_history() {
    let cluster = Cluster::start();
    let mut owner = cluster.connect();
    let (live, dead) = fill(&mut owner);
    owner.batch_execute("CREATE ROLE ops LOGIN; SELECT jq_grant('ops', '*', 'manage');").unwrap();
    let history: BTreeSet<String> = owner
        .query(
            "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'jq_job_history'::regclass AND c.reltuples > 0",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(history.len() >= 2, "today's partition and the default one hold rows: {history:?}");

    let mut ops = connect_as(&cluster, "postgres", "ops");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
    let session = std::fs::read_to_string(dir.join("session.sql")).unwrap();
    assert_eq!(ops.query(&session, &[]).unwrap().len(), 1, "session.sql sets the session up");

    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        files.insert(name, std::fs::read_to_string(&path).unwrap());
    }
    assert!(files.len() >= 20, "the statements are in dashboard/sql");
    let mut failures = Vec::new();
    for (name, statement) in &files {
        let Some(params) = parameters(name, live, dead) else {
            failures.push(format!("{name}.sql: no parameters in this test; add them"));
            continue;
        };
        let params: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
        let plan: Vec<String> = match ops.query(&format!("EXPLAIN {statement}"), &params) {
            Ok(rows) => rows.iter().map(|r| r.get(0)).collect(),
            Err(error) => {
                failures.push(format!(
                    "{name}.sql does not explain: {}",
                    error.as_db_error().map(|e| e.message().to_owned()).unwrap_or(error.to_string())
                ));
                continue;
            }
        };
        if let Some(scan) = history_read(&plan, &history) {
            failures.push(format!("{name}.sql reads the history ({scan}):\n{}", plan.join("\n")));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));

    // The lists read through the plans above still find their jobs.
    let ids: Vec<i64> = ops
        .query(&files["finished_ids"], &[&Some(vec!["q7".to_owned()]), &5000i64])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(ids.contains(&dead), "the dead job's events name it");
    let none: Option<String> = None;
    let found = ops.query(&files["finished_jobs"], &[&ids, &vec!["dead"], &none, &none, &none]).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].get::<_, i64>(0), dead);
    let running =
        ops.query(&files["queue_jobs"], &[&"q7", &Some("running"), &none, &none, &none, &51i64, &0i64]).unwrap();
    assert_eq!(running.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>(), vec![live]);
    let succeeded =
        ops.query(&files["queue_jobs"], &[&"q7", &Some("succeeded"), &none, &none, &none, &51i64, &0i64]).unwrap();
    assert_eq!(succeeded.len(), 51, "a page of q7's succeeded jobs, and one more");
}
