//! Clients other than our own: the Python example worker (examples/worker.py, psycopg 3), and the
//! waiting claim through PgBouncer in transaction mode, where LISTEN cannot work.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::Instant;

use jq_harness::{text_rows, wait_until, Client, Cluster};
use postgres::{NoTls, SimpleQueryMessage};

const PRELOAD: &str = "shared_preload_libraries = 'pg_jobqueue'";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_python_example_worker_drains_a_queue() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SELECT jq_enqueue_batch('emails', (SELECT array_agg(jsonb_build_object('to', 'user' || i))
                                                FROM generate_series(1, 200) i));
             SELECT jq_enqueue('emails', '{\"subject\": \"no recipient\"}')",
        )
        .unwrap();
    // Debian's python3-psycopg is installed for the system interpreter.
    let workers: Vec<Child> = (0..2)
        .map(|_| {
            Command::new("/usr/bin/python3")
                .arg(repo().join("examples/worker.py"))
                .args(["--dsn", &cluster.dsn(), "--queue", "emails", "--wait", "1", "--once-empty"])
                .stderr(Stdio::piped())
                .spawn()
                .expect("python3 runs")
        })
        .collect();
    for worker in workers {
        // Its log, a line per claim and report, is shown only if it failed.
        let output = worker.wait_with_output().unwrap();
        assert!(output.status.success(), "the Python worker failed:\n{}", String::from_utf8_lossy(&output.stderr));
    }
    let states = text_rows(
        &mut client,
        "SELECT status || ' ' || count(*) || ' ' || coalesce(last_error_code, '-') FROM jq_jobs
         GROUP BY status, last_error_code ORDER BY 1",
    );
    assert_eq!(states, ["dead 1 BAD_PAYLOAD", "succeeded 200 -"]);
    let attempts: i32 = client.query_one("SELECT max(attempt_count) FROM jq_jobs", &[]).unwrap().get(0);
    assert_eq!(attempts, 1, "a job ran twice");
}

/// PgBouncer in transaction mode in front of `cluster`; stopped on drop.
struct PgBouncer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl PgBouncer {
    fn start(cluster: &Cluster) -> PgBouncer {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("jq-pgbouncer-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("pgbouncer.ini");
        std::fs::write(
            &config,
            format!(
                "[databases]\npostgres = host=127.0.0.1 port={} dbname=postgres user=postgres\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n\
                 auth_type = any\npool_mode = transaction\ndefault_pool_size = 2\n\
                 logfile = {}\npidfile = {}\n",
                cluster.port(),
                dir.join("pgbouncer.log").display(),
                dir.join("pgbouncer.pid").display(),
            ),
        )
        .unwrap();
        // PgBouncer will not run as root.
        let mut command = if unsafe_is_root() {
            let _ = Command::new("chown").arg("-R").arg("postgres:").arg(&dir).status();
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--", "pgbouncer"]);
            c
        } else {
            Command::new("pgbouncer")
        };
        let child = command.arg("-q").arg(&config).spawn().expect("pgbouncer runs");
        let bouncer = PgBouncer { child, port, dir };
        wait_until("pgbouncer accepts connections", || bouncer.try_connect().is_some());
        bouncer
    }

    fn try_connect(&self) -> Option<Client> {
        Client::connect(&format!("host=127.0.0.1 port={} user=postgres dbname=postgres", self.port), NoTls).ok()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        // SIGINT to pgbouncer itself (its pidfile), not to runuser, which would complain on stderr.
        let pid = std::fs::read_to_string(self.dir.join("pgbouncer.pid")).unwrap_or_default();
        let _ = Command::new("kill").args(["-INT", pid.trim()]).status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn unsafe_is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false)
}

/// The first column of the first row of a simple-protocol query (PgBouncer's transaction mode
/// cannot keep a prepared statement from one transaction to the next).
fn simple_value(client: &mut Client, sql: &str) -> Option<String> {
    client.simple_query(sql).unwrap().into_iter().find_map(|m| match m {
        SimpleQueryMessage::Row(row) => Some(row.get(0).map(str::to_owned)),
        _ => None,
    })?
}

#[test]
fn a_waiting_claim_works_through_pgbouncer_in_transaction_mode() {
    let cluster = Cluster::start_with(&[PRELOAD, "pg_jobqueue.wait_recheck = '1h'"]);
    let bouncer = PgBouncer::start(&cluster);
    let mut waiter = bouncer.try_connect().unwrap();
    let started = Instant::now();
    let handle = thread::spawn(move || simple_value(&mut waiter, "SELECT id FROM jq_claim('b', 'w', wait => '4 min')"));

    let mut admin = cluster.connect();
    wait_until("the claim waits", || {
        admin
            .query_opt(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%jq_claim%'",
                &[],
            )
            .unwrap()
            .is_some()
    });
    let mut producer = bouncer.try_connect().unwrap();
    let id = simple_value(&mut producer, "SELECT jq_enqueue('b', '{}')").unwrap();
    // The recheck is an hour: only the enqueue's wake-up, through shared memory, ends the wait.
    assert_eq!(handle.join().unwrap(), Some(id));
    eprintln!("claimed through PgBouncer {:?} after the claim began", started.elapsed());

    // And an empty waiting claim returns no row when its wait ends.
    let mut client = bouncer.try_connect().unwrap();
    assert_eq!(simple_value(&mut client, "SELECT id FROM jq_claim('b', 'w', wait => '200 ms')"), None);
}

#[test]
fn the_plain_sql_example_worker_drains_a_queue() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute(&std::fs::read_to_string(repo().join("examples/worker.sql")).unwrap()).unwrap();
    client
        .batch_execute(
            "SELECT jq_enqueue_batch('sql', (SELECT array_agg(jsonb_build_object('n', i)) FROM generate_series(1, 200) i))",
        )
        .unwrap();
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let mut worker = cluster.connect();
            thread::spawn(move || {
                worker.batch_execute(&format!("CALL demo_worker('sql', 'sql-{w}', NULL, 0)")).unwrap()
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    // Jobs 97 and 194 fail once on purpose (a "FLAKY" error) and succeed on their second attempt.
    let states = text_rows(
        &mut client,
        "SELECT status || ' ' || count(*) || ' ' || sum(attempt_count) FROM jq_jobs GROUP BY status",
    );
    assert_eq!(states, ["succeeded 200 202"]);
}

/// jq_await through PgBouncer in transaction mode: woken through shared memory, with no LISTEN.
#[test]
fn await_works_through_pgbouncer_in_transaction_mode() {
    let cluster = Cluster::start_with(&[PRELOAD, "pg_jobqueue.wait_recheck = '1h'"]);
    let bouncer = PgBouncer::start(&cluster);
    let mut producer = bouncer.try_connect().unwrap();
    let id = simple_value(&mut producer, "SELECT jq_enqueue('b', '{}')").unwrap();
    let mut waiter = bouncer.try_connect().unwrap();
    let query = format!("SELECT result::text FROM jq_await({id}, '4 min')");
    let handle = thread::spawn(move || simple_value(&mut waiter, &query));

    let mut admin = cluster.connect();
    wait_until("jq_await waits", || {
        admin
            .query_opt(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Extension' AND query LIKE '%jq_await%'",
                &[],
            )
            .unwrap()
            .is_some()
    });
    // The pool has two server connections; the waiter holds one while it waits, the worker's
    // transactions take turns on the other.
    let token = simple_value(&mut producer, "SELECT lease_token FROM jq_claim('b', 'w')").unwrap();
    simple_value(&mut producer, &format!("SELECT jq_complete({id}, 'w', {token}, result => '{{\"n\": 1}}')"));
    assert_eq!(handle.join().unwrap().as_deref(), Some("{\"n\": 1}"));
}
