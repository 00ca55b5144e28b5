//! Throwaway PostgreSQL servers for tests that need real connections: commits seen across sessions,
//! SKIP LOCKED between claimers, reaping while workers run. `#[pg_test]` cannot do these, because
//! its one transaction is rolled back.

pub mod client;
pub mod history;
pub mod prometheus;
pub mod replication;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub use postgres::Client;

/// A running server with pg_jobqueue created in database `postgres`; stopped and removed on drop,
/// including when a test panics.
pub struct Cluster {
    dir: PathBuf,
    port: u16,
    stopped: bool,
    /// The PostgreSQL major version it runs (scripts/pgversion.sh's PG).
    version: String,
}

impl Cluster {
    pub fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    /// Starts a server with extra postgresql.conf lines.
    pub fn start_with(settings: &[&str]) -> Cluster {
        let cluster = Cluster::start_without_extension(settings);
        cluster.connect().batch_execute("CREATE EXTENSION pg_jobqueue").expect("CREATE EXTENSION");
        cluster
    }

    /// Starts a server with extra postgresql.conf lines and creates nothing in it, for tests that
    /// create their extensions themselves (the router's, in another schema).
    pub fn start_without_extension(settings: &[&str]) -> Cluster {
        Cluster::start_on(&pg_version(), settings)
    }

    /// Starts a server of the major version given (15 or 18), whatever the version under test,
    /// with extra postgresql.conf lines and nothing created in it.
    pub fn start_on(version: &str, settings: &[&str]) -> Cluster {
        let cluster = Cluster::init_on(version, settings, &[]);
        cluster.start_again();
        cluster
    }

    /// Makes a server's data directory (initdb, with the options given, and the postgresql.conf
    /// lines) of the major version given, and leaves the server down: a target for pg_upgrade.
    pub fn init_on(version: &str, settings: &[&str], initdb_options: &[&str]) -> Cluster {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("jq-harness-{}-{port}", std::process::id()));
        let cluster = Cluster { dir, port, stopped: false, version: version.to_owned() };
        let status = cluster
            .pg_sh("init")
            .arg(port.to_string())
            .args(settings)
            .env("PG_INITDB_OPTIONS", initdb_options.join(" "))
            .status()
            .expect("scripts/pg.sh runs");
        assert!(status.success(), "initdb failed for the test server in {}", cluster.dir.display());
        cluster
    }

    /// scripts/pg.sh COMMAND for this server's directory and version.
    fn pg_sh(&self, command: &str) -> Command {
        let mut pg_sh = Command::new(pg_script());
        pg_sh.env("PG", &self.version).arg(command).arg(&self.dir);
        pg_sh
    }

    /// The server's data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.dir
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server as a crash would (`pg_ctl stop -m immediate`: no checkpoint, no goodbye to
    /// clients), then starts it again on the same data, which runs crash recovery.
    pub fn crash_and_restart(&self) {
        self.crash();
        self.start_again();
    }

    /// Stops the server as a crash would (`pg_ctl stop -m immediate`) and leaves it down.
    pub fn crash(&self) {
        let crashed = self.pg_sh("crash").status().expect("scripts/pg.sh runs");
        assert!(crashed.success(), "the immediate shutdown failed");
    }

    /// Stops the server (a fast shutdown), leaves it down for `down`, and starts it again on the
    /// same data.
    pub fn restart_after(&self, down: Duration) {
        self.halt();
        std::thread::sleep(down);
        self.start_again();
    }

    /// Stops the server with a fast shutdown and keeps its data, for `start_again`.
    pub fn halt(&self) {
        let stopped = self.pg_sh("halt").status().expect("scripts/pg.sh runs");
        assert!(stopped.success(), "the test server did not stop");
    }

    /// Starts a halted server again on the same data and port.
    pub fn start_again(&self) {
        let started = self.pg_sh("start").arg(self.port.to_string()).status().expect("scripts/pg.sh runs");
        assert!(started.success(), "the server did not come back (see {}/server.log)", self.dir.display());
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Stops the server with a fast shutdown, removes it, and says how long the shutdown took. Fails
    /// when the fast shutdown does not end (`pg_ctl` gives up after 60 s): a process that ignores it.
    pub fn stop(mut self) -> Duration {
        let started = Instant::now();
        if self.dir.join("postmaster.pid").exists() {
            self.halt();
        }
        let took = started.elapsed();
        let status = self.pg_sh("stop").status().expect("scripts/pg.sh runs");
        assert!(status.success(), "the test server's directory was not removed");
        self.stopped = true;
        took
    }

    pub fn connect(&self) -> Client {
        self.try_connect().expect("connect to the test server")
    }

    /// A connection, or None while the server is not accepting them (during a restart).
    pub fn try_connect(&self) -> Option<Client> {
        Client::connect(&self.dsn(), postgres::NoTls).ok()
    }

    /// Connection parameters, for threads that connect on their own.
    pub fn dsn(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.pg_sh("stop").status();
        }
    }
}

/// The server version under test: PG, as scripts/pgversion.sh reads it (15 unless set;
/// `make test PG=18`).
pub fn pg_version() -> String {
    std::env::var("PG").unwrap_or_else(|_| "15".to_owned())
}

/// Where the programs and libraries of the server version under test are.
pub fn pg_dir() -> PathBuf {
    pg_dir_of(&pg_version())
}

/// A program of the server version given, run as the `postgres` user when the tests run as root
/// (PostgreSQL refuses root), as the caller otherwise.
pub fn as_postgres(version: &str, program: &str) -> Command {
    let program = pg_dir_of(version).join("bin").join(program);
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

pub fn is_root() -> bool {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() == 0 }
}

/// Where the programs and libraries of a server version are.
pub fn pg_dir_of(version: &str) -> PathBuf {
    PathBuf::from(format!("/usr/lib/postgresql/{version}"))
}

fn pg_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg.sh")
}

/// A TCP port of 127.0.0.1 that nothing listens on now, for a server or a scraper a test starts.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind a free port").local_addr().unwrap().port()
}

/// The status code and body of an HTTP GET of `path` on 127.0.0.1:`port`, or None while nothing
/// answers there (a Prometheus, an exporter or jq-worker's metrics a test started).
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // HTTP/1.0: the answer is the body as it is, never chunked.
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((head.split_whitespace().nth(1)?.parse().ok()?, body.to_owned()))
}

/// Polls `condition` until it holds. The limit is generous on purpose: tests wait for states, and
/// only a state that never comes fails them.
pub fn wait_until(what: &str, condition: impl FnMut() -> bool) {
    wait_until_within(what, Duration::from_secs(60), condition);
}

/// `wait_until` with another limit, for states that come on a schedule (pg_cron runs once a minute).
pub fn wait_until_within(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The first column of every row `sql` returns, as text: for comparing whole states in one assert.
pub fn text_rows(client: &mut Client, sql: &str) -> Vec<String> {
    client.query(sql, &[]).expect("the query runs").iter().map(|row| row.get(0)).collect()
}

/// The SQL statements the guide, the README and the examples show users that read the extension's
/// tables and views (and call no waiting function): the queries a DBA copies.
pub fn documented_queries() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut texts = vec![std::fs::read_to_string(root.join("README.md")).unwrap()];
    let mut chapters: Vec<_> =
        std::fs::read_dir(root.join("docs/src")).unwrap().map(|entry| entry.unwrap().path()).collect();
    chapters.sort();
    texts.extend(
        chapters
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .map(|p| std::fs::read_to_string(p).unwrap()),
    );
    let mut queries = Vec::new();
    for text in texts {
        for block in text.split("```sql\n").skip(1) {
            let block = block.split("```").next().unwrap_or_default();
            for statement in block.split(";\n") {
                let statement: String = statement
                    .lines()
                    .filter(|line| !line.trim_start().starts_with("--"))
                    .collect::<Vec<_>>()
                    .join("\n");
                let statement = statement.trim();
                let reads = statement.starts_with("SELECT") || statement.starts_with("WITH");
                let views =
                    ["jq_jobs", "jq_live_jobs", "jq_job_events", "jq_managed_jobs", "jq_queue_stats", "jq_list_jobs"];
                if reads
                    && views.iter().any(|view| statement.contains(view))
                    && !statement.contains("jq_claim")
                    && !statement.contains("jq_await")
                {
                    queries.push(statement.to_string());
                }
            }
        }
    }
    queries
}
