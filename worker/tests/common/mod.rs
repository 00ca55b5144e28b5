//! What the jq-worker test files share: a scratch directory per test and a jq-worker process.

// Each test file uses its own part of this module.
#![allow(dead_code)]

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

pub const PRELOADED: &str = "shared_preload_libraries = 'pg_jobqueue'";
pub const FAST_REAPER: &str = "pg_jobqueue.reaper_interval = '200ms'";

/// A scratch directory for one test: the commands' working directory, ledgers and worker logs.
/// Removed when the test passes, kept for reading when it fails.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("jq-worker-test-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// One jq-worker process, in its own process group, killed on drop if still running.
pub struct Worker {
    pub child: Child,
    pub log: PathBuf,
}

impl Worker {
    /// Runs `sh -c script` for each job, in `dir`, logging to `dir/NAME.log`.
    pub fn start(dsn: &str, queue: &str, name: &str, flags: &[&str], dir: &Path, script: &str) -> Worker {
        let log = dir.join(format!("{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_jq-worker"))
            .args(["--dsn", dsn, "--queue", queue, "--name", name])
            .args(flags)
            .args(["--", "sh", "-c", script])
            .current_dir(dir)
            .stderr(File::create(&log).unwrap())
            .process_group(0)
            .spawn()
            .expect("jq-worker starts");
        Worker { child, log }
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "jq-worker did not exit within {limit:?}:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Job ids from the log lines `{event} job N...`.
    pub fn jobs(&self, event: &str) -> Vec<i64> {
        let marker = format!(": {event} job ");
        self.log()
            .lines()
            .filter_map(|line| line.split_once(&marker))
            .map(|(_, rest)| rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap())
            .collect()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // SAFETY: as in signal(); the group is the worker's own (process_group(0)).
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}
