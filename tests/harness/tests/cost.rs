//! What the library costs a server (guide, "What it costs your server"), checked against servers:
//! each table of the chapter is read from `docs/src/cost.md` (marked `<!-- cost: NAME -->`, as
//! `scripts/cost.sh` printed it) and compared with what a server of the same settings shows, so the
//! chapter cannot drift from the extension: the background workers and the slots they take, the
//! role they connect as, a short pool of worker slots, and the shared memory of each structure.

use std::path::Path;
use std::time::Duration;

use jq_harness::{pg_version, text_rows, wait_until, wait_until_within, Client, Cluster};

const PRELOADED: &str = "shared_preload_libraries = 'pg_jobqueue'";
const FAST: &str = "pg_jobqueue.reaper_interval = '200ms'";

/// The processes that take a `max_worker_processes` slot, as `scripts/cost.sh` lists them.
const WORKERS: &str = "SELECT backend_type || ' | ' || coalesce(datname::text, '(none)') || ' | ' || coalesce(usename::text, '(none)')
                       FROM pg_stat_activity
                       WHERE backend_type IN ('pg_jobqueue launcher', 'pg_jobqueue reaper', 'logical replication launcher', 'parallel worker')
                       ORDER BY backend_type, datname NULLS FIRST";

fn chapter() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src/cost.md")).unwrap()
}

/// The lines after the marker `<!-- cost: NAME -->`, up to the next blank line.
fn marked(name: &str) -> Vec<String> {
    let text = chapter();
    let marker = format!("<!-- cost: {name} -->");
    let start = text.find(&marker).unwrap_or_else(|| panic!("the chapter has no {marker}"));
    text[start + marker.len()..]
        .trim_start_matches('\n')
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::to_owned)
        .collect()
}

/// The rows of the Markdown table marked NAME, each as its cells, without the header and the rule.
fn table(name: &str) -> Vec<Vec<String>> {
    marked(name)
        .iter()
        .skip(2)
        .map(|line| line.trim().trim_matches('|').split('|').map(|cell| cell.trim().to_owned()).collect())
        .collect()
}

/// The header cells of the table marked NAME.
fn header(name: &str) -> Vec<String> {
    marked(name)[0].trim().trim_matches('|').split('|').map(|cell| cell.trim().to_owned()).collect()
}

/// The rows of the table marked NAME, as `WORKERS` returns them.
fn worker_rows(name: &str) -> Vec<String> {
    table(name).iter().map(|row| row.join(" | ")).collect()
}

fn connect_to(cluster: &Cluster, database: &str) -> Client {
    let dsn = cluster.dsn().replace("dbname=postgres", &format!("dbname={database}"));
    Client::connect(&dsn, postgres::NoTls).expect("connect to the database")
}

fn reapers(client: &mut Client) -> Vec<String> {
    text_rows(client, "SELECT datname::text FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper' ORDER BY 1")
}

/// CREATE DATABASE `name` and the extension in it, then waits for its worker when `served`.
fn database_with_extension(cluster: &Cluster, name: &str, served: bool) {
    let mut client = cluster.connect();
    client.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
    connect_to(cluster, name).batch_execute("CREATE EXTENSION pg_jobqueue").unwrap();
    if served {
        wait_until(&format!("{name} is served"), || reapers(&mut client).contains(&name.to_owned()));
    }
}

/// The workers at PostgreSQL's defaults, the extension in three databases: a launcher and one worker
/// per database, all as the bootstrap superuser, and the settings that bound them, as the chapter's
/// tables say.
#[test]
fn the_workers_and_their_settings_are_the_chapters() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST]);
    let mut client = cluster.connect();
    wait_until("postgres is served", || reapers(&mut client) == ["postgres"]);
    database_with_extension(&cluster, "app_one", true);
    database_with_extension(&cluster, "app_two", true);
    let launchers = worker_rows("workers").iter().filter(|row| row.starts_with("pg_jobqueue launcher")).count();
    let workers = worker_rows("workers").iter().filter(|row| row.starts_with("pg_jobqueue reaper")).count();
    assert_eq!((launchers, workers), (1, 3), "the chapter's table: a launcher and one worker per database");
    assert_eq!(text_rows(&mut client, WORKERS), worker_rows("workers"));

    let settings: Vec<String> = table("settings").iter().map(|row| row.join(" | ")).collect();
    let names: Vec<String> = table("settings").iter().map(|row| format!("'{}'", row[0])).collect();
    let shown = text_rows(
        &mut client,
        &format!(
            "SELECT name || ' | ' || CASE setting WHEN '' THEN '(empty)' ELSE setting END FROM pg_settings
             WHERE name IN ({}) ORDER BY name",
            names.join(", ")
        ),
    );
    assert_eq!(shown, settings);
}

/// With `pg_jobqueue.reaper_role` set, the workers connect as that role, the launcher as the
/// bootstrap superuser, as the chapter's table says.
#[test]
fn with_a_reaper_role_the_workers_connect_as_it() {
    let cluster = Cluster::start_without_extension(&[PRELOADED, FAST, "pg_jobqueue.reaper_role = 'jq_maintenance'"]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE ROLE jq_maintenance LOGIN;
             CREATE EXTENSION pg_jobqueue;
             GRANT EXECUTE ON FUNCTION jq_reap, jq_prune TO jq_maintenance",
        )
        .unwrap();
    // The launcher looks for a missing role again only a minute later; restarted, it finds it at once.
    drop(client);
    cluster.halt();
    cluster.start_again();
    let mut client = cluster.connect();
    wait_until("postgres is served", || reapers(&mut client) == ["postgres"]);
    let rows = worker_rows("role");
    assert!(
        rows.iter().any(|row| row == "pg_jobqueue reaper | postgres | jq_maintenance"),
        "the chapter's table: {rows:?}"
    );
    assert_eq!(text_rows(&mut client, WORKERS), rows);
}

/// With `max_worker_processes = 4` and the extension in three databases, two are served; the third
/// is left unserved and logged with the chapter's line, parallel query gets no worker, and the third
/// database is served once a slot frees (the launcher tries again a minute later).
#[test]
fn a_short_pool_leaves_a_database_unserved_until_a_slot_frees() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST, "max_worker_processes = 4"]);
    let mut client = cluster.connect();
    wait_until("postgres is served", || reapers(&mut client) == ["postgres"]);
    database_with_extension(&cluster, "app_one", true);
    database_with_extension(&cluster, "app_two", false);
    let line = marked("log").iter().find(|line| line.contains("pg_jobqueue launcher")).cloned().expect("the log line");
    wait_until("the short pool is logged", || cluster.log().contains(&line));
    assert_eq!(text_rows(&mut client, WORKERS), worker_rows("short"));
    let served = text_rows(&mut connect_to(&cluster, "app_two"), "SELECT served_by FROM jq_maintenance");
    assert_eq!(served, ["inline"], "claims maintain the unserved database meanwhile");

    client
        .batch_execute(
            "CREATE TABLE numbers AS SELECT generate_series(1, 100000) AS n;
             SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0",
        )
        .unwrap();
    let plan =
        text_rows(&mut client, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM numbers");
    let workers: Vec<&str> = plan
        .iter()
        .map(|line| line.trim())
        .filter(|line| line.starts_with("Workers Planned") || line.starts_with("Workers Launched"))
        .collect();
    assert_eq!(marked("parallel"), [format!("A parallel query meanwhile: {}.", workers.join("; "))]);

    // A served database dropped frees its slot.
    client.batch_execute("DROP DATABASE app_one").unwrap();
    wait_until_within("app_two is served once a slot is free", Duration::from_secs(150), || {
        reapers(&mut client) == ["app_two", "postgres"]
    });
}

/// Each structure's size in `pg_shmem_allocations` at the defaults is the chapter's, in the column
/// of the server version under test, and so is the total; raising `pg_jobqueue.stats_max_queues` by
/// 256 and `max_connections` by 100 grows each by what the chapter's last column says.
#[test]
fn shared_memory_is_the_chapters() {
    let column = header("shmem")
        .iter()
        .position(|cell| *cell == format!("PostgreSQL {}, defaults", pg_version()))
        .unwrap_or_else(|| panic!("the chapter has no shared memory column for PostgreSQL {}", pg_version()));
    let rows = table("shmem");
    let (total, structures) = rows.split_last().unwrap();
    assert_eq!(total[0], "total");
    let mut structures = structures.to_vec();
    structures.sort();
    let stated: Vec<(String, i64)> =
        structures.iter().map(|row| (row[0].clone(), row[column].parse().unwrap())).collect();
    assert_eq!(
        stated.iter().map(|(_, size)| size).sum::<i64>(),
        total[column].parse::<i64>().unwrap(),
        "the chapter's total is the sum of its rows"
    );
    let sizes = |cluster: &Cluster| -> Vec<(String, i64)> {
        cluster
            .connect()
            .query("SELECT name, size FROM pg_shmem_allocations WHERE name LIKE 'pg_jobqueue%' ORDER BY name", &[])
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1)))
            .collect::<std::collections::BTreeMap<String, i64>>()
            .into_iter()
            .collect()
    };
    let defaults = Cluster::start_without_extension(&[PRELOADED]);
    assert_eq!(sizes(&defaults), stated, "pg_shmem_allocations at the defaults");
    defaults.stop();

    let raised =
        Cluster::start_without_extension(&[PRELOADED, "pg_jobqueue.stats_max_queues = 512", "max_connections = 200"]);
    let grown: Vec<(String, i64)> = structures
        .iter()
        .zip(&stated)
        .map(|(row, (name, size))| {
            let growth = &row[row.len() - 1];
            let per: i64 = growth.split(' ').next().unwrap().parse().unwrap_or(0);
            let more = if growth == "fixed" {
                0
            } else if growth.ends_with("per pg_jobqueue.stats_max_queues") {
                per * 256
            } else if growth.contains("per server process slot") {
                per * 100
            } else {
                panic!("the chapter's growth of {name} is not one this test knows: {growth}")
            };
            (name.clone(), size + more)
        })
        .collect();
    assert_eq!(sizes(&raised), grown, "pg_shmem_allocations with 256 more queues counted and 100 more connections");
}

/// Without preload, the first claim makes the claim fronts' segment, of the chapter's size.
#[test]
fn the_segment_without_preload_is_the_chapters() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute("SELECT jq_enqueue('q', '{}'); SELECT count(*) FROM jq_claim('q', 'w')").unwrap();
    let file = std::fs::read_to_string(cluster.data_dir().join("pg_stat_tmp/pg_jobqueue.segment")).unwrap();
    let handle = file.split_whitespace().next().unwrap();
    let size = std::fs::metadata(format!("/dev/shm/PostgreSQL.{handle}")).unwrap().len();
    assert_eq!(
        marked("segment"),
        [format!("The claim fronts' dynamic shared memory segment, made by the first claim: {size} bytes.")]
    );
}
