//! The Python example worker (examples/worker.py) against real servers, with its `handle` replaced
//! by one the test controls: a job that outlasts its lease, a lease lost while the job runs, a
//! server restart while the job runs, and `--once-empty` for a role that may only consume. Then
//! the pipeline example (examples/pipeline.py, guide "Workflows": fan-out, fan-in, a merge step
//! that reads jq_parent_results) under jq-worker and under the Python worker. Judged from jq_jobs,
//! jq_job_events, the worker's log and the files its jobs write, never from timing.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use jq_harness::client::connect_as;
use jq_harness::{text_rows, wait_until, Client, Cluster};

mod common;
use common::{Scratch, Worker, FAST_REAPER, PRELOADED};

/// Runs examples/worker.py's main() (the folder of worker.py is the first argument) with `handle`
/// replaced: each run appends the payload's `n` to ./ledger, then works in steps of 50 ms for
/// `seconds`, or until the file named `until` exists, looking at the lease between steps, and
/// appends `n` to ./finished when it is done. `lease` has a default so that the same handle also
/// runs under a worker.py that passes none.
const WITH_TEST_HANDLE: &str = r#"
import os, sys, time
sys.path.insert(0, sys.argv.pop(1))
import worker

def handle(payload, lease=None):
    with open("ledger", "a") as ledger:
        ledger.write(f"{payload['n']}\n")
    until = time.monotonic() + payload.get("seconds", 0)
    while time.monotonic() < until or ("until" in payload and not os.path.exists(payload["until"])):
        if lease is not None:
            lease.check()
        time.sleep(0.05)
    with open("finished", "a") as finished:
        finished.write(f"{payload['n']}\n")

worker.handle = handle
worker.main()
"#;

/// examples/worker.py with the test's handle, in `dir`, logging to `dir/NAME.log`; killed on drop.
fn python_worker(dsn: &str, queue: &str, name: &str, flags: &[&str], dir: &Path) -> Worker {
    let log = dir.join(format!("{name}.log"));
    let examples: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    // Debian's python3-psycopg is installed for the system interpreter.
    let child = Command::new("/usr/bin/python3")
        // -B: no __pycache__ left in examples/.
        .args(["-B", "-c", WITH_TEST_HANDLE])
        .arg(examples)
        .args(["--dsn", dsn, "--queue", queue, "--name", name])
        .args(flags)
        .current_dir(dir)
        .stderr(File::create(&log).unwrap())
        .process_group(0)
        .spawn()
        .expect("python3 runs");
    Worker { child, log }
}

fn enqueue(client: &mut Client, queue: &str, payload: &str) -> i64 {
    client.query_one("SELECT jq_enqueue($1, $2::text::jsonb)", &[&queue, &payload]).unwrap().get(0)
}

/// The lines of `dir/NAME` (the ledger: one per run of a job; finished: one per run that ended).
fn lines(dir: &Path, name: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// (status, attempt_count, lease_owner) of a job.
fn job(client: &mut Client, id: i64) -> (String, i32, Option<String>) {
    let row =
        client.query_one("SELECT status::text, attempt_count, lease_owner FROM jq_jobs WHERE id = $1", &[&id]).unwrap();
    (row.get(0), row.get(1), row.get(2))
}

fn events(client: &mut Client, id: i64) -> Vec<String> {
    client
        .query("SELECT event FROM jq_job_events WHERE job_id = $1 ORDER BY id", &[&id])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// A job that runs for more than twice its lease (7 s on a 3 s lease), with a second worker on the
/// queue that would take it if the lease expired: the first worker's heartbeats keep the lease, so
/// the job runs once, and is completed by the first worker on its first attempt.
#[test]
fn the_python_worker_heartbeats_a_job_that_outlasts_its_lease() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST_REAPER]);
    let mut client = cluster.connect();
    let id = enqueue(&mut client, "long", r#"{"n": 1, "seconds": 7}"#);
    let dir = Scratch::new("py-long");
    let flags = ["--lease", "3", "--wait", "1", "--once-empty"];
    let mut first = python_worker(&cluster.dsn(), "long", "first", &flags, &dir);
    wait_until("the first worker holds the job", || job(&mut client, id).2.as_deref() == Some("first"));
    let mut second = python_worker(&cluster.dsn(), "long", "second", &flags, &dir);
    assert!(first.wait_exit(Duration::from_secs(120)).success(), "{}", first.log());
    assert!(second.wait_exit(Duration::from_secs(120)).success(), "{}", second.log());

    assert_eq!(job(&mut client, id), ("succeeded".into(), 1, None), "{}\n{}", first.log(), second.log());
    assert_eq!(first.jobs("completed"), vec![id], "{}", first.log());
    assert!(second.jobs("claimed").is_empty(), "the second worker got the job:\n{}", second.log());
    assert_eq!(lines(&dir, "ledger"), vec!["1"], "the job ran once");
    assert_eq!(events(&mut client, id), Vec::<String>::new(), "the lease never expired");
}

/// A job cancelled while it runs: the next heartbeat is refused, the handle stops at its next look
/// at the lease (it would otherwise run until a file that never comes), and the worker reports
/// nothing; the job stays cancelled.
#[test]
fn the_python_worker_stops_a_job_whose_lease_is_lost() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let id = enqueue(&mut client, "lost", r#"{"n": 1, "until": "never"}"#);
    let dir = Scratch::new("py-lost");
    let mut worker = python_worker(&cluster.dsn(), "lost", "l", &["--lease", "3", "--wait", "1", "--once-empty"], &dir);
    wait_until("the job runs", || !lines(&dir, "ledger").is_empty());
    assert!(client.query_one("SELECT jq_cancel($1)", &[&id]).unwrap().get::<_, bool>(0));

    assert!(worker.wait_exit(Duration::from_secs(60)).success(), "{}", worker.log());
    let log = worker.log();
    assert!(
        log.contains(&format!("lease lost on job {id} (lease token 1): heartbeat refused, nothing reported")),
        "{log}"
    );
    assert!(worker.jobs("completed").is_empty() && worker.jobs("failed").is_empty(), "{log}");
    assert_eq!(lines(&dir, "finished"), Vec::<String>::new(), "the handle went on after the lease was lost");
    assert_eq!(job(&mut client, id), ("cancelled".into(), 1, None));
    assert_eq!(events(&mut client, id), vec!["cancelled".to_string()]);
}

/// The server restarts while a job runs: the heartbeats reconnect and renew the lease on the new
/// server, and the completion, sent on a connection made anew, is taken under the token of the
/// claim. The job runs once, on its first attempt.
#[test]
fn the_python_worker_keeps_its_lease_across_a_server_restart() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST_REAPER]);
    let mut client = cluster.connect();
    let id = enqueue(&mut client, "restart", r#"{"n": 1, "until": "go"}"#);
    let dir = Scratch::new("py-restart");
    let mut worker =
        python_worker(&cluster.dsn(), "restart", "r", &["--lease", "8", "--wait", "1", "--once-empty"], &dir);
    wait_until("the job runs", || !lines(&dir, "ledger").is_empty());
    cluster.restart_after(Duration::from_millis(200));
    let mut client = cluster.connect_retrying();
    let expiry =
        "SELECT extract(epoch FROM lease_expires_at)::float8 FROM jq_jobs WHERE id = $1 AND status = 'running'";
    let before: f64 = client.query_one(expiry, &[&id]).expect("the job still runs after the restart").get(0);
    wait_until("a heartbeat renews the lease on the restarted server", || {
        client.query_opt(expiry, &[&id]).unwrap().is_some_and(|row| row.get::<_, f64>(0) > before)
    });
    File::create(dir.join("go")).unwrap();

    assert!(worker.wait_exit(Duration::from_secs(60)).success(), "{}", worker.log());
    let log = worker.log();
    assert!(log.contains("reconnected"), "{log}");
    assert_eq!(job(&mut client, id), ("succeeded".into(), 1, None), "{log}");
    let token: i64 = client.query_one("SELECT lease_token FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get(0);
    assert!(log.contains(&format!("claimed job {id} (attempt 1, lease token {token})")), "{log}");
    assert!(log.contains(&format!("completed job {id} (lease token {token})")), "{log}");
    assert_eq!(lines(&dir, "ledger"), vec!["1"], "the job ran once");
    assert_eq!(events(&mut client, id), Vec::<String>::new(), "the lease never expired");
}

/// `--once-empty` for a role with only the `consume` right on the queue (guide, "Security"), which
/// may not read jq_jobs: the worker drains the queue, a job scheduled for later included, and exits 0.
#[test]
fn the_python_worker_once_empty_needs_only_the_consume_right() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute("CREATE ROLE mailer LOGIN; SELECT jq_grant('mailer', 'emails', 'consume');").unwrap();
    let mut ids: Vec<i64> = (1..=5).map(|n| enqueue(&mut client, "emails", &format!(r#"{{"n": {n}}}"#))).collect();
    ids.push(
        client
            .query_one(
                "SELECT jq_enqueue('emails', '{\"n\": 6}', run_at => clock_timestamp() + interval '2 seconds')",
                &[],
            )
            .unwrap()
            .get(0),
    );
    let refused = connect_as(&cluster, "postgres", "mailer")
        .query("SELECT 1 FROM jq_jobs", &[])
        .expect_err("a consumer may not read jq_jobs");
    assert_eq!(refused.code(), Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE));
    let dir = Scratch::new("py-consume");
    let dsn = cluster.dsn().replace("user=postgres", "user=mailer");
    let mut worker = python_worker(&dsn, "emails", "m", &["--wait", "1", "--once-empty"], &dir);

    assert!(worker.wait_exit(Duration::from_secs(60)).success(), "{}", worker.log());
    let log = worker.log();
    assert!(!log.contains("Traceback") && !log.contains("failed"), "{log}");
    let mut completed = worker.jobs("completed");
    completed.sort_unstable();
    assert_eq!(completed, ids, "{log}");
    for id in ids {
        assert_eq!(job(&mut client, id).0, "succeeded");
    }
}

/// examples/pipeline.py, the pipeline of the guide's "Workflows": the path of the example and the
/// merge result its fixed export adds up to.
fn pipeline() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/pipeline.py")
}
const PIPELINE_TOTAL: &str = r#"{"total": 800, "regions": {"north": 420, "south": 120, "east": 260}}"#;

/// One run of the pipeline, enqueued by the example itself: the merge job's id.
fn enqueue_pipeline(dsn: &str) -> i64 {
    let out = Command::new("/usr/bin/python3")
        .arg("-B")
        .arg(pipeline())
        .args(["enqueue", "--dsn", dsn])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "enqueue failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().parse().expect("the merge job's id")
}

/// What the pipeline's run left, judged from jq_jobs: every job of it succeeded; each transform was
/// claimed after the fetch job finished, and the merge job after the last transform finished; the
/// transforms read the fetch job's rows and the merge job added up their totals.
fn check_pipeline(client: &mut Client, merge: i64) {
    let jobs = text_rows(
        client,
        "SELECT queue_name || ' ' || status || ' ' || attempt_count FROM jq_jobs WHERE queue_name IN \
         ('fetch', 'transform', 'merge') ORDER BY id",
    );
    let expected = ["fetch", "transform", "transform", "transform", "merge"].map(|q| format!("{q} succeeded 1"));
    assert_eq!(jobs, expected);
    let order =
        "SELECT bool_and(t.claimed_at >= f.finished_at) AND (SELECT m.claimed_at FROM jq_jobs m WHERE m.id = $1) \
                 >= max(t.finished_at) \
                 FROM jq_jobs t, jq_jobs f WHERE t.queue_name = 'transform' AND f.queue_name = 'fetch'";
    assert!(client.query_one(order, &[&merge]).unwrap().get::<_, bool>(0), "a step ran before its inputs were done");
    let totals = text_rows(client, "SELECT result::text FROM jq_jobs WHERE queue_name = 'transform' ORDER BY id");
    assert_eq!(
        totals,
        [
            r#"{"total": 420, "region": "north"}"#,
            r#"{"total": 120, "region": "south"}"#,
            r#"{"total": 260, "region": "east"}"#
        ]
    );
    let right = "SELECT result = $2::text::jsonb FROM jq_jobs WHERE id = $1";
    assert!(client.query_one(right, &[&merge, &PIPELINE_TOTAL]).unwrap().get::<_, bool>(0));
}

/// The pipeline under jq-worker, one worker per step's queue, each started before the run is
/// enqueued (the merge and transform workers find only held jobs at first): the fetch job runs,
/// then the three transforms, then the merge, whose result is the total; each job runs once. The
/// workers are stopped with SIGTERM at the end.
#[test]
fn the_pipeline_example_runs_under_jq_worker() {
    let cluster = Cluster::start_with(&[PRELOADED]);
    let mut client = cluster.connect();
    let dsn = cluster.dsn();
    let dir = Scratch::new("pipeline-jq");
    let mut workers: Vec<(&str, Worker)> = [("fetch", 1), ("transform", 3), ("merge", 1)]
        .into_iter()
        .map(|(step, slots)| {
            let command = format!("exec /usr/bin/python3 -B '{}' run {step} --dsn '{dsn}'", pipeline().display());
            let slots = slots.to_string();
            (step, Worker::start(&dsn, step, step, &["--wait", "1", "--concurrency", &slots], &dir, &command))
        })
        .collect();
    let merge = enqueue_pipeline(&dsn);
    wait_until("the merge job finishes", || {
        let status = client.query_one("SELECT status::text FROM jq_jobs WHERE id = $1", &[&merge]).unwrap();
        status.get::<_, String>(0) != "pending" && status.get::<_, String>(0) != "running"
    });
    check_pipeline(&mut client, merge);
    for (step, worker) in &mut workers {
        worker.signal(libc::SIGTERM);
        assert!(worker.wait_exit(Duration::from_secs(60)).success(), "{step}:\n{}", worker.log());
        let log = worker.log();
        assert!(!log.contains("Traceback"), "{step}:\n{log}");
        let runs = worker.jobs("claimed").len();
        assert_eq!(runs, if *step == "transform" { 3 } else { 1 }, "{step}:\n{log}");
        assert_eq!(worker.jobs("completed").len(), runs, "{step}:\n{log}");
    }
}

/// The same pipeline under the Python example worker, one per step's queue, each with
/// `--once-empty`: a queue whose jobs are all held is not empty, so the merge and transform workers,
/// started with nothing claimable (the fetch worker starts after two of their waiting claims have
/// come back empty), wait for their jobs to be released; each worker exits by itself once its step
/// is done.
#[test]
fn the_pipeline_example_runs_under_the_python_worker() {
    let cluster = Cluster::start_with(&[PRELOADED]);
    let mut client = cluster.connect();
    let dsn = cluster.dsn();
    let merge = enqueue_pipeline(&dsn);
    let dir = Scratch::new("pipeline-py");
    let start = |step: &str| {
        let log = dir.join(format!("{step}.log"));
        let child = Command::new("/usr/bin/python3")
            .arg("-B")
            .arg(pipeline())
            .args(["work", step, "--dsn", &dsn, "--name", step, "--wait", "1", "--once-empty"])
            .current_dir(&*dir)
            .stderr(File::create(&log).unwrap())
            .process_group(0)
            .spawn()
            .expect("python3 runs");
        Worker { child, log }
    };
    let mut workers = vec![("merge", start("merge")), ("transform", start("transform"))];
    std::thread::sleep(Duration::from_millis(2500));
    for (step, worker) in &mut workers {
        assert!(worker.child.try_wait().unwrap().is_none(), "{step} exited with only held jobs:\n{}", worker.log());
    }
    workers.push(("fetch", start("fetch")));
    for (step, worker) in &mut workers {
        assert!(worker.wait_exit(Duration::from_secs(120)).success(), "{step}:\n{}", worker.log());
        let log = worker.log();
        assert!(!log.contains("Traceback"), "{step}:\n{log}");
        let runs = worker.jobs("claimed").len();
        assert_eq!(runs, if *step == "transform" { 3 } else { 1 }, "{step}:\n{log}");
        assert_eq!(worker.jobs("completed").len(), runs, "{step}:\n{log}");
    }
    check_pipeline(&mut client, merge);
}
