//! The update from 0.3.0 under the programs that read a queue's figures (guide, "Upgrading"):
//! Debian's postgres_exporter with monitoring/postgres_exporter.yaml, jq-dashboard, and sessions
//! that read the views `jq_queue_stats`, `jq_queue_health` and `jq_jobs` over and over. The update
//! replaces those views after it has altered their tables; a reader that came in between used to
//! hold the view and wait for its table, and the update failed with `40P01` after its work.

use jq_harness::{free_port, http_get, wait_until, Client, Cluster};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const EXPORTER: &str = "/usr/bin/prometheus-postgres-exporter";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dashboard_binary() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repository().join("target"));
    target.join("debug/jq-dashboard")
}

/// What one reader saw: each failure, with its time against the update's, and how many reads
/// succeeded after the update committed.
#[derive(Default)]
struct Reads {
    failures: Vec<(Instant, String)>,
    after_commit: usize,
}

/// A program killed on drop.
struct Program(Child);

impl Drop for Program {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Calls `read` every 5 ms until `stop`; `committed` says when the update committed.
fn reader(
    stop: Arc<AtomicBool>,
    committed: Arc<Mutex<Option<Instant>>>,
    mut read: impl FnMut() -> Result<(), String> + Send + 'static,
) -> JoinHandle<Reads> {
    std::thread::spawn(move || {
        let mut reads = Reads::default();
        while !stop.load(SeqCst) {
            let started = Instant::now();
            let outcome = read();
            let after = committed.lock().unwrap().is_some_and(|at| started > at);
            match outcome {
                Ok(()) if after => reads.after_commit += 1,
                Ok(()) => {}
                Err(e) => reads.failures.push((started, e)),
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        reads
    })
}

/// Jobs as 0.3.0's functions left them: `n` pending ones in a queue, enough that altering and
/// indexing the hot table takes the update a while, with readers arriving meanwhile.
fn jobs_as_0_3_0(client: &mut Client, n: i32) {
    client
        .batch_execute(&format!(
            "INSERT INTO jq_queue_ids (queue_name) VALUES ('work');
             INSERT INTO jq_live_jobs (queue_id, payload, status, available_at, attempt_count, max_attempts, created_at)
             SELECT q.queue_id, jsonb_build_object('n', n), 'pending', now(), 0, 8, now()
             FROM jq_queue_ids q, generate_series(1, {n}) AS n WHERE q.queue_name = 'work';
             ANALYZE"
        ))
        .unwrap();
}

/// guide, "Upgrading", "From 0.3.0 to 0.4.0": the update takes every lock first, so its readers
/// wait for it instead of deadlocking with it. With postgres_exporter, jq-dashboard and three
/// sessions reading throughout: the update succeeds; no read anywhere fails with a deadlock; the
/// views that call no function never fail a read (they wait while the update runs); and after the
/// commit every scrape, page and read succeeds. Until the commit, what calls a function may fail
/// only with the documented 55000 of a database older than its library, at once.
#[test]
fn an_update_from_0_3_0_under_its_readers_neither_deadlocks_nor_fails_a_read() {
    assert!(
        dashboard_binary().exists(),
        "{} is missing: build it with `cargo build -p jq-dashboard` (scripts/test.sh integration does)",
        dashboard_binary().display()
    );
    let cluster = Cluster::start_with(&["shared_preload_libraries = 'pg_jobqueue'"]);
    cluster.connect().batch_execute("CREATE DATABASE upgraded").unwrap();
    let dsn = cluster.dsn().replace("dbname=postgres", "dbname=upgraded");
    let mut admin = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
    // In the schema monitoring/postgres_exporter.yaml names.
    admin
        .batch_execute("CREATE SCHEMA jobqueue; CREATE EXTENSION pg_jobqueue VERSION '0.3.0' SCHEMA jobqueue")
        .unwrap();
    admin.batch_execute("SET search_path = jobqueue").unwrap();
    jobs_as_0_3_0(&mut admin, 300_000);

    let exporter_port = free_port();
    let exporter_log = std::env::temp_dir().join(format!("jq-upgrade-readers-exporter-{exporter_port}.log"));
    let _exporter = Program(
        Command::new(EXPORTER)
            .env(
                "DATA_SOURCE_NAME",
                format!("host=127.0.0.1 port={} user=postgres dbname=upgraded sslmode=disable", cluster.port()),
            )
            .arg(format!("--web.listen-address=127.0.0.1:{exporter_port}"))
            .arg(format!("--extend.query-path={}", repository().join("monitoring/postgres_exporter.yaml").display()))
            .args(["--disable-default-metrics", "--disable-settings-metrics"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&exporter_log).unwrap())
            .spawn()
            .expect("start prometheus-postgres-exporter"),
    );
    let dashboard_port = free_port();
    let _dashboard = Program(
        Command::new(dashboard_binary())
            .args(["--listen", &format!("127.0.0.1:{dashboard_port}")])
            .args(["--dsn", &format!("postgres://postgres@127.0.0.1:{}/upgraded", cluster.port())])
            // The Host header http_get sends.
            .args(["--allowed-host", "127.0.0.1"])
            .env_remove("DATABASE_URL")
            .env_remove("JQ_DASHBOARD_PASSWORD")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start jq-dashboard"),
    );
    wait_until("the exporter and the dashboard answer", || {
        http_get(exporter_port, "/metrics").is_some() && http_get(dashboard_port, "/").is_some()
    });

    let stop = Arc::new(AtomicBool::new(false));
    let committed: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let mut readers: Vec<(String, JoinHandle<Reads>)> = Vec::new();
    for view in ["jq_queue_stats", "jq_queue_health", "jq_jobs"] {
        let mut client = postgres::Client::connect(&dsn, postgres::NoTls).unwrap();
        let sql = match view {
            "jq_jobs" => "SELECT count(*) FROM jobqueue.jq_jobs WHERE queue_name = 'work'".to_owned(),
            _ => format!("SELECT * FROM jobqueue.{view}"),
        };
        let read = move || client.query(sql.as_str(), &[]).map(|_| ()).map_err(|e| error_text(&e));
        readers.push((view.to_owned(), reader(stop.clone(), committed.clone(), read)));
    }
    // A scrape of the exporter fails when one of its queries did (pg_exporter_last_scrape_error).
    let scrape = move || match http_get(exporter_port, "/metrics") {
        Some((200, body)) if body.lines().any(|l| l == "pg_exporter_last_scrape_error 0") => Ok(()),
        Some((status, body)) => Err(format!("exporter {status}: {}", scrape_error(&body))),
        None => Err("exporter did not answer".to_owned()),
    };
    readers.push(("exporter".to_owned(), reader(stop.clone(), committed.clone(), scrape)));
    for page in ["/", "/metrics"] {
        let get = move || match http_get(dashboard_port, page) {
            Some((200, _)) => Ok(()),
            Some((status, body)) => {
                Err(format!("dashboard {page} {status}: {}", body.chars().take(300).collect::<String>()))
            }
            None => Err(format!("dashboard {page} did not answer")),
        };
        readers.push((format!("dashboard {page}"), reader(stop.clone(), committed.clone(), get)));
    }

    // Readers run before, during and after the update.
    std::thread::sleep(Duration::from_millis(500));
    let began = Instant::now();
    let update = admin.batch_execute("ALTER EXTENSION pg_jobqueue UPDATE");
    *committed.lock().unwrap() = Some(Instant::now());
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, SeqCst);
    let readers: Vec<(String, Reads)> =
        readers.into_iter().map(|(name, handle)| (name, handle.join().unwrap())).collect();
    let exporter_log = std::fs::read_to_string(&exporter_log).unwrap_or_default();

    assert!(update.is_ok(), "the update failed after {:?}: {:?}", began.elapsed(), update.err());
    let at = committed.lock().unwrap().unwrap();
    for (name, reads) in &readers {
        for (when, failure) in &reads.failures {
            assert!(!failure.contains("deadlock") && !failure.contains("40P01"), "{name}: {failure}");
            // jq_queue_stats and jq_jobs never fail. What calls a function (jq_queue_health reads
            // jq_maintenance_status(), the exporter and the dashboard call several) may, before
            // the commit, fail only as the guide says a database older than its library answers
            // (55000), at once.
            let calls_functions = !matches!(name.as_str(), "jq_queue_stats" | "jq_jobs");
            assert!(
                calls_functions && *when < at && (name != "jq_queue_health" || failure.starts_with("55000")),
                "{name} failed at {:?} after the update began, which committed after {:?}: {failure}\n\
                 the exporter's log:\n{exporter_log}",
                when.saturating_duration_since(began),
                at - began
            );
        }
        assert!(reads.after_commit > 0, "{name} read nothing after the commit");
        assert!(!reads.failures.iter().any(|(when, _)| *when > at), "{name} failed after the commit");
    }
    assert!(!exporter_log.contains("deadlock"), "the exporter met a deadlock:\n{exporter_log}");
    for line in exporter_log.lines().filter(|l| l.contains("Error running query")) {
        assert!(line.contains("older than its library"), "the exporter failed otherwise than with 55000: {line}");
    }
}

/// The exporter's error lines of a scrape, for the message of a failed one.
fn scrape_error(body: &str) -> String {
    body.lines().filter(|l| l.starts_with("pg_exporter_last_scrape_error")).collect::<Vec<_>>().join(" ")
}

/// An error as "SQLSTATE: message".
fn error_text(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => e.to_string(),
    }
}
