//! Installing a new build on a running server (guide, "Install"): `scripts/install.sh` writes
//! each file beside the installed one and renames it over, so the backends that mapped the old
//! library keep it, new backends load the new one, and nothing runs on code rewritten under it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use jq_harness::client::enqueue_many;
use jq_harness::{wait_until, Client, Cluster};

fn installed_library() -> PathBuf {
    jq_harness::pg_dir().join("lib/pg_jobqueue.so")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Installs `library` as pg_jobqueue.so through scripts/install.sh, from a staged tree of its own.
fn install_library(library: &[u8], stage: &Path) {
    let dir = stage.join(installed_library().strip_prefix("/").unwrap()).parent().unwrap().to_path_buf();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("pg_jobqueue.so"), library).unwrap();
    let status = Command::new(repo().join("scripts/install.sh")).arg(stage).status().expect("install.sh runs");
    assert!(status.success(), "scripts/install.sh failed");
}

/// Puts the library the test found back when it ends, passed or not.
struct Restore {
    library: Vec<u8>,
    stage: PathBuf,
}

impl Drop for Restore {
    fn drop(&mut self) {
        install_library(&self.library, &self.stage.join("restore"));
        let _ = std::fs::remove_dir_all(&self.stage);
    }
}

/// The inode of the pg_jobqueue library that the backend of `client` has mapped.
fn mapped_inode(client: &mut Client) -> u64 {
    inode_mapped_by(client.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0))
}

fn inode_mapped_by(pid: i32) -> u64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let line = maps.lines().find(|l| l.contains("/pg_jobqueue.so")).expect("the backend has mapped pg_jobqueue");
    line.split_whitespace().nth(4).unwrap().parse().unwrap()
}

fn installed_inode() -> u64 {
    std::fs::metadata(installed_library()).unwrap().ino()
}

#[test]
fn a_build_installed_under_a_serving_server_crashes_no_backend_and_serves_after_a_restart() {
    let cluster =
        Cluster::start_with(&["shared_preload_libraries = 'pg_jobqueue'", "pg_jobqueue.reaper_interval = '100ms'"]);
    enqueue_many(&mut cluster.connect(), "busy", 50_000);
    let stop = Arc::new(AtomicBool::new(false));
    let claimers: Vec<_> = (0..4)
        .map(|w| {
            let (mut client, stop) = (cluster.connect(), stop.clone());
            thread::spawn(move || {
                let worker = format!("w{w}");
                let mut done = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    // Short leases, some left to expire, keep the background reaper busy too.
                    let rows = client
                        .query("SELECT id, lease_token FROM jq_claim('busy', $1, interval '200 ms', 5)", &[&worker])
                        .expect("a claim failed while the new build was installed");
                    for (i, row) in rows.iter().enumerate() {
                        if i % 5 != 4 {
                            let (id, token): (i64, i64) = (row.get(0), row.get(1));
                            client.execute("SELECT jq_complete($1, $2, $3)", &[&id, &worker, &token]).unwrap();
                        }
                    }
                    done += rows.len() as u64;
                }
                done
            })
        })
        .collect();
    let mut serving = cluster.connect();
    let before = mapped_inode(&mut serving);
    assert_eq!(before, installed_inode());

    // A different build: the installed library with bytes appended (a loader ignores them).
    let original = std::fs::read(installed_library()).unwrap();
    let stage = std::env::temp_dir().join(format!("jq-install-test-{}", std::process::id()));
    let _restore = Restore { library: original.clone(), stage: stage.clone() };
    let mut changed = original.clone();
    changed.extend_from_slice(b"a different build of pg_jobqueue\n");
    thread::sleep(Duration::from_millis(500));
    install_library(&changed, &stage.join("new"));
    thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::SeqCst);
    let claimed: u64 = claimers.into_iter().map(|c| c.join().expect("a claimer failed")).sum();

    // Running backends kept the file they mapped, and so do new ones: a preloaded library comes
    // from the postmaster, which loaded it at start.
    assert_ne!(installed_inode(), before, "the library was rewritten in place");
    assert_eq!(std::fs::read(installed_library()).unwrap(), changed);
    assert_eq!(mapped_inode(&mut serving), before);
    let mut fresh = cluster.connect();
    assert_eq!(mapped_inode(&mut fresh), before);
    let log = cluster.log();
    assert!(
        !log.contains("terminated by signal") && !log.contains("terminating any other active server processes"),
        "a backend crashed:\n{log}"
    );

    // After a restart every process runs the new build, the background reaper included, which
    // goes on reaping the leases the claimers left to expire.
    drop((serving, fresh));
    cluster.restart_after(Duration::ZERO);
    let mut after = cluster.connect();
    assert_eq!(mapped_inode(&mut after), installed_inode());
    let reaper = |client: &mut Client| -> Option<i32> {
        client
            .query_opt("SELECT pid FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper' LIMIT 1", &[])
            .unwrap()
            .map(|row| row.get(0))
    };
    let mut pid = None;
    wait_until("the background reaper starts", || {
        pid = reaper(&mut after);
        pid.is_some()
    });
    assert_eq!(inode_mapped_by(pid.unwrap()), installed_inode());
    wait_until("the background reaper reaps the leases left to expire", || {
        let running: i64 =
            after.query_one("SELECT count(*) FROM jq_jobs WHERE status = 'running'", &[]).unwrap().get(0);
        running == 0
    });
    println!("install under load: {claimed} jobs claimed while the new build was installed");
}
