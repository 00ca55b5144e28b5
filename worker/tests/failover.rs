//! Failover with real servers (guide, "Failover"): a primary and an asynchronous streaming standby
//! on this machine, and workers (jq-worker, and the Python example) that reach both through one
//! multi-host connection string with `target_session_attrs=read-write`. Streaming is cut, the old
//! primary goes on claiming and completing (and even crashes and starts a new server lifetime, with
//! a token epoch the standby never sees), then it is stopped as a crash would stop it and the
//! standby is promoted. The same workers carry on there, and a new one joins.
//!
//! Everything is judged from what the clients were handed (their logs) and from the two servers'
//! rows, never from timing.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use jq_harness::client::{claim, complete};
use jq_harness::{wait_until, wait_until_within, Client, Cluster};

mod common;
use common::{Scratch, Worker, FAST_REAPER, PRELOADED};

/// Seconds of lease per claim: long enough that a report held up by the failover still reaches the
/// promoted standby within its lease, where it must be refused.
const LEASE: &str = "8";
const QUEUE: &str = "failover";
/// The queue of the probe's one job, which no worker serves.
const PROBE_QUEUE: &str = "failover_probe";

/// The Python example worker (examples/worker.py), logging to `dir/NAME.log`; killed on drop.
struct PythonWorker {
    child: Child,
    log: PathBuf,
}

impl PythonWorker {
    fn start(dsn: &str, name: &str, dir: &Path) -> PythonWorker {
        let log = dir.join(format!("{name}.log"));
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/worker.py");
        // Debian's python3-psycopg is installed for the system interpreter.
        let child = Command::new("/usr/bin/python3")
            .arg(example)
            .args(["--dsn", dsn, "--queue", QUEUE, "--name", name, "--wait", "1", "--lease", LEASE])
            .stderr(File::create(&log).unwrap())
            .spawn()
            .expect("python3 runs");
        PythonWorker { child, log }
    }

    fn stop(&mut self) {
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the Python worker failed:\n{}", std::fs::read_to_string(&self.log).unwrap());
    }
}

impl Drop for PythonWorker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one client log says: the leases it was granted and the reports the server took or refused,
/// as (job, lease_token).
#[derive(Default)]
struct Handed {
    grants: Vec<(i64, i64)>,
    completed: Vec<(i64, i64)>,
    refused: Vec<(i64, i64)>,
}

impl Handed {
    /// Reads the lines `claimed job J (attempt A, lease token T)`, `completed job J (lease token T)`
    /// and `lease lost on job J (lease token T): ...`, which jq-worker and the Python example both
    /// write.
    fn read(&mut self, log: &str) {
        for line in log.lines() {
            let Some((_, event)) = line.split_once(": ") else { continue };
            let list = if event.starts_with("claimed job ") {
                &mut self.grants
            } else if event.starts_with("completed job ") {
                &mut self.completed
            } else if event.starts_with("lease lost on job ") {
                &mut self.refused
            } else {
                continue;
            };
            let number = |after: &str| -> i64 {
                let rest = &event[event.find(after).unwrap_or_else(|| panic!("{line}")) + after.len()..];
                rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
            };
            list.push((number("job "), number("lease token ")));
        }
    }
}

/// Every job of the queue on one server: id → (status, lease_token, attempt_count, max_attempts).
fn jobs(client: &mut Client) -> HashMap<i64, (String, i64, i32, i32)> {
    client
        .query(
            "SELECT id, status::text, lease_token, attempt_count, max_attempts FROM jq_jobs WHERE queue_name = $1",
            &[&QUEUE],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), (row.get(1), row.get(2), row.get(3), row.get(4))))
        .collect()
}

fn succeeded(client: &mut Client) -> i64 {
    client
        .query_one("SELECT count(*) FROM jq_jobs WHERE queue_name = $1 AND status = 'succeeded'", &[&QUEUE])
        .unwrap()
        .get(0)
}

/// Waits until `more` jobs beyond those succeeded now have succeeded on `server`, through
/// reconnections: the server may be restarting.
fn wait_for_completions(server: &Cluster, more: i64) {
    let target = succeeded(&mut server.connect_retrying()) + more;
    wait_until("the workers complete more jobs", || {
        std::thread::sleep(Duration::from_millis(50));
        server.try_connect().is_some_and(|mut c| succeeded(&mut c) >= target)
    });
}

#[test]
fn a_promoted_standby_grants_no_lease_twice_and_refuses_every_stale_report() {
    let primary = Cluster::start_with(&[PRELOADED, FAST_REAPER]);
    let mut client = primary.connect();
    client
        .batch_execute(&format!(
            "INSERT INTO jq_queues (queue_name, backoff_base, backoff_cap) VALUES ('{QUEUE}', '50 ms', '500 ms');
             -- One job becomes claimable every 50 ms, so work goes on across the whole failover.
             SELECT jq_enqueue('{QUEUE}', jsonb_build_object('to', 'user' || i),
                               run_at => clock_timestamp() + i * interval '50 ms')
             FROM generate_series(1, 300) i;
             -- The probe's own job, in a queue no worker serves, so its claim below races nobody.
             SELECT jq_enqueue('{PROBE_QUEUE}', '{{}}');"
        ))
        .unwrap();
    let standby = primary.start_standby();
    let dsn = format!(
        "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname=postgres target_session_attrs=read-write",
        primary.port(),
        standby.port()
    );
    let dir = Scratch::new("failover");
    let (script, flags) = ("cat >/dev/null; sleep 0.3", ["--concurrency", "3", "--lease", LEASE, "--wait", "1"]);
    let mut workers = vec![
        Worker::start(&dsn, QUEUE, "a", &flags, &dir, script),
        Worker::start(&dsn, QUEUE, "b", &flags, &dir, script),
    ];
    let mut python = PythonWorker::start(&dsn, "py", &dir);
    wait_for_completions(&primary, 30);

    // From here on the standby hears nothing more: what it has is what a promotion keeps.
    standby.cut_streaming();
    let received = jobs(&mut standby.connect());
    // Enqueues and completions the old primary acknowledges and the standby never sees: then a
    // crash of the old primary, whose next lifetime raises a token epoch the standby never sees
    // either, and more claims and completions in it.
    client
        .batch_execute(&format!("SELECT jq_enqueue('{QUEUE}', '{{\"to\": \"lost\"}}') FROM generate_series(1, 20)"))
        .unwrap();
    wait_for_completions(&primary, 20);
    primary.crash_and_restart();
    // New work for the new lifetime: the spread-out jobs may all be done by now on a slow machine.
    primary
        .connect_retrying()
        .batch_execute(&format!("SELECT jq_enqueue('{QUEUE}', '{{\"to\": \"lost\"}}') FROM generate_series(1, 20)"))
        .unwrap();
    wait_for_completions(&primary, 20);
    // A holder the test controls: its lease comes from the old primary's last lifetime, on a job
    // the standby received as pending.
    let mut probe = primary.connect_retrying();
    let (stale_id, stale_token) =
        claim(&mut probe, PROBE_QUEUE, "probe", "1 minute").expect("the probe claims its job on the old primary");
    primary.crash();
    standby.promote();
    workers.push(Worker::start(&dsn, QUEUE, "c", &flags, &dir, script));

    let mut promoted = standby.connect();
    assert!(
        !complete(&mut promoted, stale_id, "probe", stale_token),
        "the promoted standby took a completion for a lease only the old primary granted"
    );
    // The promoted standby grants that job again, under a token the old primary never handed out.
    let regrant = claim(&mut promoted, PROBE_QUEUE, "probe", "1 minute").expect("the probe's job is claimable again");
    assert_eq!(regrant.0, stale_id);
    assert!(complete(&mut promoted, regrant.0, "probe", regrant.1), "the new lease's completion is taken");
    wait_until_within("every job on the promoted standby is finished", Duration::from_secs(180), || {
        std::thread::sleep(Duration::from_millis(100));
        jobs(&mut promoted).values().all(|(status, ..)| ["succeeded", "dead", "cancelled"].contains(&status.as_str()))
    });
    for worker in &mut workers {
        worker.signal(libc::SIGTERM);
        assert!(worker.wait_exit(Duration::from_secs(60)).success(), "{}", worker.log());
    }
    python.stop();

    let mut handed = Handed { grants: vec![(stale_id, stale_token), regrant], ..Handed::default() };
    for worker in &workers {
        handed.read(&worker.log());
    }
    let python_log = std::fs::read_to_string(&python.log).unwrap();
    handed.read(&python_log);
    assert!(python_log.contains("reconnected"), "the Python worker did not follow the failover:\n{python_log}");
    for worker in &workers[..2] {
        assert!(worker.log().contains("reconnected"), "jq-worker did not follow the failover:\n{}", worker.log());
    }

    // No (job, lease_token) was granted twice, across both servers.
    let unique: HashSet<_> = handed.grants.iter().collect();
    assert_eq!(unique.len(), handed.grants.len(), "a (job, lease_token) was granted twice");

    // Every enqueue and completion the standby had received is kept; what came after the cut is
    // lost (asynchronous replication), and every job that remains reaches a final state.
    let after = jobs(&mut promoted);
    let ids: HashSet<_> = received.keys().collect();
    assert_eq!(after.keys().collect::<HashSet<_>>(), ids, "the promoted standby has exactly the jobs it received");
    for (id, (status, token, ..)) in &received {
        if status == "succeeded" {
            assert_eq!(&after[id].0, "succeeded", "job {id}'s completion was lost after it reached the standby");
            assert_eq!(after[id].1, *token, "job {id} ran again after its completion reached the standby");
        }
    }
    // The promoted standby's tokens start above every token of the old timeline.
    let floor: i64 = promoted.query_one("SELECT max(epoch) << 32 FROM jq_token_epochs", &[]).unwrap().get(0);
    for (id, (status, token, attempts, max)) in &after {
        assert!(["succeeded", "dead"].contains(&status.as_str()), "job {id} ended {status}");
        assert!(attempts <= max, "job {id}: {attempts} attempts of {max}");
        if status == "succeeded" && *token < floor {
            // Completed under a lease of the old primary: only if the standby had that lease.
            let (before, held) = (&received[id].0, received[id].1);
            assert!(
                ["running", "succeeded"].contains(&before.as_str()) && held == *token,
                "job {id} succeeded under token {token}, which only the old primary granted: a stale report was taken"
            );
        }
    }
    // Every report the clients saw refused was for a lease the promoted standby does not hold.
    let completed_there: HashSet<(i64, i64)> =
        after.iter().filter(|(_, (s, ..))| s == "succeeded").map(|(id, (_, token, ..))| (*id, *token)).collect();
    assert!(handed.refused.iter().all(|lease| !completed_there.contains(lease)));
    println!(
        "failover: {} jobs received by the standby, {} grants, {} reports taken, {} refused, tokens on the new \
         timeline from {floor}",
        received.len(),
        handed.grants.len(),
        handed.completed.len(),
        handed.refused.len()
    );
}
