//! A good citizen of the cluster (guide, "Maintenance" and "Set up"): with the library preloaded,
//! a statement that calls no jq_* function fails exactly as it does on a server without the
//! library, with every field a driver sees (SQLSTATE, message, DETAIL, HINT, CONTEXT, position,
//! schema, table, column, constraint, and the server's file, line and routine), in a database with
//! the extension and in one without. PostgreSQL's own regression suite checks the same at length
//! (`make test-pgsuite`); these are the cases, one per field, a reader can run.
//!
//! And on a server configured as PostgreSQL ships (`jit` on), the extension's own statements are
//! never compiled: a worker that connects for each job pays for none (guide, "Performance").

use std::io::Write;

use jq_harness::{Client, Cluster};

const SETUP: &str = "CREATE TABLE t (a int PRIMARY KEY, b int);
                     INSERT INTO t VALUES (1, 1), (2, 1);
                     CREATE VIEW v AS SELECT * FROM t;";

/// Utility statements that fail, each for one field of the error (or more).
const FAILING: &[&str] = &[
    // SQLSTATE and message.
    "CREATE TABLE t (a int)",
    // DETAIL, schema, table and constraint names.
    "CREATE UNIQUE INDEX t_b ON t (b)",
    // DETAIL and HINT.
    "DROP TABLE t",
    // HINT.
    "ALTER TABLE t ALTER COLUMN b TYPE date",
    // Table and constraint names.
    "ALTER TABLE t ADD CONSTRAINT b_big CHECK (b > 5)",
    // Position.
    "CREATE TABLE u (a no_such_type)",
    "EXPLAIN SELECT no_such_column FROM t",
    "CALL no_such_procedure()",
    // CONTEXT, from PL/pgSQL, with DETAIL and HINT of the user's own.
    "DO $$ BEGIN RAISE EXCEPTION 'mine' USING DETAIL = 'its detail', HINT = 'its hint'; END $$",
    // CONTEXT, from an EXECUTE of a prepared statement with a bad parameter.
    "PREPARE p(int) AS SELECT $1; EXECUTE p('x')",
    "VACUUM no_such_table",
    "CREATE DATABASE postgres",
    "DROP DATABASE no_such_database",
    "ALTER DATABASE no_such_database RENAME TO another",
    "CREATE DATABASE copy TEMPLATE no_such_database",
];

/// Every field of each statement's error, as the driver received it.
fn errors(client: &mut Client) -> Vec<String> {
    client.batch_execute(SETUP).unwrap();
    let mut seen: Vec<String> = FAILING
        .iter()
        .map(|statement| {
            let error = client.batch_execute(statement).expect_err(statement);
            format!("{statement}: {:?}", error.as_db_error().expect("a server error"))
        })
        .collect();
    // CONTEXT from COPY, with a bad row.
    let mut copy = client.copy_in("COPY t FROM STDIN").unwrap();
    copy.write_all(b"3\tnot a number\n").unwrap();
    let error = copy.finish().expect_err("the row is refused");
    seen.push(format!("COPY: {:?}", error.as_db_error().expect("a server error")));
    client.batch_execute("DROP VIEW v; DROP TABLE t; DEALLOCATE ALL").unwrap();
    seen
}

fn connect_to(cluster: &Cluster, database: &str) -> Client {
    let dsn = cluster.dsn().replace("dbname=postgres", &format!("dbname={database}"));
    Client::connect(&dsn, postgres::NoTls).expect("connect to the database")
}

#[test]
fn utility_errors_are_the_servers_own_with_every_field() {
    let plain = Cluster::start_without_extension(&[]);
    let expected = errors(&mut plain.connect());
    drop(plain);

    // The extension in postgres, served by its worker; none in other.
    let preloaded = Cluster::start_with(&["shared_preload_libraries = 'pg_jobqueue'"]);
    preloaded.connect().batch_execute("CREATE DATABASE other").unwrap();
    for database in ["postgres", "other"] {
        let seen = errors(&mut connect_to(&preloaded, database));
        for (want, got) in expected.iter().zip(&seen) {
            assert_eq!(got, want, "in database {database}, the error changed");
        }
        assert_eq!(seen.len(), expected.len());
    }
}

/// With `jit` on, as it is by default, none of the statements behind a session's claims and
/// completions is compiled, in sessions that each connect for one job. Their plans avoid
/// sequential scans at a cost the planner adds, which used to lift a statement that can only read a
/// small table over `jit_above_cost`: about 0.1 s of compiling on each session's first claim.
#[test]
fn a_new_session_compiles_none_of_its_statements() {
    let cluster = Cluster::start_with(&[
        "shared_preload_libraries = 'pg_jobqueue,pg_stat_statements'",
        "pg_stat_statements.track = all",
        "jit = on",
    ]);
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE EXTENSION pg_stat_statements").unwrap();
    let available: bool = admin.query_one("SELECT pg_jit_available()", &[]).unwrap().get(0);
    assert!(available, "this server has no JIT provider (Debian's postgresql package has one)");
    admin.batch_execute("SELECT jq_enqueue_batch('jit', array_fill('{}'::jsonb, ARRAY[3]))").unwrap();
    admin.batch_execute("SELECT pg_stat_statements_reset()").unwrap();
    for n in 0..3 {
        let mut worker = cluster.connect();
        let claimed = worker.query_one("SELECT id, lease_token FROM jq_claim('jit', 'w')", &[]).unwrap();
        let (id, token): (i64, i64) = (claimed.get(0), claimed.get(1));
        let done: bool = worker.query_one("SELECT jq_complete($1, 'w', $2)", &[&id, &token]).unwrap().get(0);
        assert!(done, "job {n} completed");
    }
    let compiled =
        jq_harness::text_rows(&mut admin, "SELECT left(query, 200) FROM pg_stat_statements WHERE jit_functions > 0");
    assert!(compiled.is_empty(), "compiled with JIT: {compiled:#?}");
}

/// Where the server's environment sets `RUST_BACKTRACE` (as some hosts' shells do), an error the
/// extension raises carries no Rust backtrace in its DETAIL, preloaded or not; and the variable is
/// still there for what the server runs (a `COPY ... TO PROGRAM` sees it).
#[test]
fn no_rust_backtrace_reaches_a_client_whatever_the_servers_environment() {
    for settings in [&[][..], &["shared_preload_libraries = 'pg_jobqueue'"][..]] {
        let version = jq_harness::pg_version();
        let cluster = Cluster::init_on(&version, settings, &[]);
        let dir = cluster.data_dir();
        let started = jq_harness::as_postgres(&version, "pg_ctl")
            .env("RUST_BACKTRACE", "1")
            .arg("-D")
            .arg(dir)
            .arg("-l")
            .arg(dir.join("server.log"))
            .args(["-w", "-t", "60", "start"])
            .stdout(std::process::Stdio::null())
            .status()
            .expect("pg_ctl runs");
        assert!(started.success(), "the server did not start");
        let mut client = cluster.connect();
        client.batch_execute("CREATE EXTENSION pg_jobqueue").unwrap();
        // The extension's own refusals, and a PostgreSQL error that passes through its frames (a
        // waiting claim's statement timeout), where pgrx put the backtrace.
        for (sql, code) in [
            ("SELECT jq_enqueue(NULL, '{}')", "22004"),
            ("SELECT jq_claim('q', 'w', batch_size => 0)", "22023"),
            ("SET statement_timeout = '100ms'; SELECT * FROM jq_claim('q', 'w', wait => '5 s')", "57014"),
        ] {
            let error = client.batch_execute(sql).unwrap_err();
            let error = error.as_db_error().unwrap_or_else(|| panic!("{sql}: {error}"));
            assert_eq!(error.code().code(), code, "{sql}");
            assert_eq!(error.detail(), None, "{settings:?}: {sql} carries a DETAIL");
        }
        client.batch_execute("RESET statement_timeout").unwrap();
        client.batch_execute("COPY (SELECT 1) TO PROGRAM 'printenv RUST_BACKTRACE > rust_backtrace'").unwrap();
        let kept: String = client.query_one("SELECT pg_read_file('rust_backtrace')", &[]).unwrap().get(0);
        assert_eq!(kept.trim(), "1", "{settings:?}: the server's environment changed");
    }
}
