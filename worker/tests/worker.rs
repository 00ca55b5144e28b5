//! jq-worker against real servers: each test runs the binary as separate processes, as it runs in
//! production, and judges the outcome from jq_jobs, jq_job_events, the worker's log and the files
//! its commands write.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use jq_harness::client::connect_as;
use jq_harness::{wait_until, wait_until_within, Client, Cluster};

mod common;
use common::{Scratch, Worker, FAST_REAPER, PRELOADED};

fn enqueue(client: &mut Client, queue: &str, jobs: i32) -> Vec<i64> {
    client
        .query(
            "SELECT jq_enqueue_batch($1, (SELECT array_agg(jsonb_build_object('n', i)) FROM generate_series(1, $2) i))",
            &[&queue, &jobs],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// Job count by status for `queue`.
fn statuses(client: &mut Client, queue: &str) -> BTreeMap<String, i64> {
    client
        .query("SELECT status::text, count(*) FROM jq_jobs WHERE queue_name = $1 GROUP BY 1", &[&queue])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

/// The job ids the commands appended to `dir/ledger`, one line per run, in order.
fn ledger(dir: &Path) -> Vec<i64> {
    std::fs::read_to_string(dir.join("ledger"))
        .unwrap_or_default()
        .lines()
        .map(|line| line.trim().parse().unwrap())
        .collect()
}

fn sorted(mut ids: Vec<i64>) -> Vec<i64> {
    ids.sort_unstable();
    ids
}

/// Whether a process runs: it exists and is not a zombie waiting for a parent to reap it.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

/// Two instances of three slots each drain 200 jobs: every job succeeds, and every job ran and was
/// completed exactly once.
#[test]
fn two_instances_drain_a_queue_once_each() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let dir = Scratch::new("drain");
    let ids = enqueue(&mut client, "drain", 200);
    let script = "cat >/dev/null; echo $JQ_JOB_ID >> ledger";
    let flags = ["--concurrency", "3", "--wait", "1", "--once-empty"];
    let mut a = Worker::start(&cluster.dsn(), "drain", "a", &flags, &dir, script);
    let mut b = Worker::start(&cluster.dsn(), "drain", "b", &flags, &dir, script);
    assert!(a.wait_exit(Duration::from_secs(120)).success(), "{}", a.log());
    assert!(b.wait_exit(Duration::from_secs(120)).success(), "{}", b.log());

    assert_eq!(statuses(&mut client, "drain"), BTreeMap::from([("succeeded".into(), 200)]));
    assert_eq!(sorted(ledger(&dir)), ids, "every job ran exactly once");
    let (done_a, done_b) = (a.jobs("completed"), b.jobs("completed"));
    assert!(!done_a.is_empty() && !done_b.is_empty(), "both instances worked: {} and {}", done_a.len(), done_b.len());
    assert_eq!(sorted([done_a, done_b].concat()), ids, "every job was completed exactly once");
}

/// Three instances on a queue with a 2-second lease and the background reaper: one is killed
/// (SIGKILL) while it holds jobs, one is stopped (SIGTERM) while it holds jobs, and the third drains
/// the rest. The killed instance's jobs come back by lease expiry; the stopped one finishes what it
/// holds, claims nothing more and exits 0; no job is lost, dead or left running.
#[test]
fn crash_and_sigterm_lose_no_job() {
    let cluster = Cluster::start_with(&[PRELOADED, FAST_REAPER]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "INSERT INTO jq_queues (queue_name, default_lease, backoff_base) VALUES ('w', '2 seconds', '100 ms')",
        )
        .unwrap();
    let dir = Scratch::new("crash");
    let ids = enqueue(&mut client, "w", 60);
    let script = "cat >/dev/null; sleep 0.3; echo $JQ_JOB_ID >> ledger";
    let dsn = cluster.dsn();
    let held_by = |client: &mut Client, worker: &str| -> Vec<i64> {
        let rows = client
            .query(
                "SELECT id FROM jq_jobs WHERE status = 'running' AND lease_owner LIKE $1 ORDER BY id",
                &[&format!("{worker}/%")],
            )
            .unwrap();
        rows.iter().map(|row| row.get(0)).collect()
    };

    let killed = Worker::start(&dsn, "w", "killed", &["--concurrency", "2", "--wait", "1"], &dir, script);
    let mut stopped = Worker::start(&dsn, "w", "stopped", &["--concurrency", "2", "--grace", "10"], &dir, script);
    let mut drainer =
        Worker::start(&dsn, "w", "drainer", &["--concurrency", "2", "--wait", "1", "--once-empty"], &dir, script);

    wait_until("the instance to kill holds a job", || !held_by(&mut client, "killed").is_empty());
    drop(killed); // SIGKILL to its process group
    let stranded = held_by(&mut client, "killed");
    assert!(!stranded.is_empty(), "the killed instance held no job when it died");

    wait_until("the instance to stop holds a job", || !held_by(&mut client, "stopped").is_empty());
    let sent = Instant::now();
    stopped.signal(libc::SIGTERM);
    let status = stopped.wait_exit(Duration::from_secs(20));
    let log = stopped.log();
    assert!(status.success(), "SIGTERM: exit {status}\n{log}");
    assert!(sent.elapsed() < Duration::from_secs(10), "exited after {:?}, past its grace", sent.elapsed());
    assert_eq!(held_by(&mut client, "stopped"), Vec::<i64>::new(), "the stopped instance left leases behind");
    let (_, after_stop) = log.split_once(": stopping").expect("the stop is logged");
    assert!(!after_stop.contains("claimed job"), "claimed after SIGTERM:\n{log}");
    let finished = sorted([stopped.jobs("completed"), stopped.jobs("released")].concat());
    assert_eq!(
        finished,
        sorted(stopped.jobs("claimed")),
        "a job the stopped instance claimed was neither completed nor released\n{log}"
    );

    assert!(drainer.wait_exit(Duration::from_secs(120)).success(), "{}", drainer.log());
    assert_eq!(statuses(&mut client, "w"), BTreeMap::from([("succeeded".into(), 60)]));
    // At least once: a run killed with its worker may have written its line before it died.
    let ran: BTreeSet<i64> = ledger(&dir).into_iter().collect();
    assert_eq!(ran.into_iter().collect::<Vec<_>>(), ids, "every job ran");
    for id in stranded {
        let reaped: bool = client
            .query_one(
                "SELECT attempt_count >= 2 AND EXISTS (SELECT 1 FROM jq_job_events WHERE job_id = $1 AND event = 'lease_expired')
                 FROM jq_jobs WHERE id = $1",
                &[&id],
            )
            .unwrap()
            .get(0);
        assert!(reaped, "job {id}, held by the killed instance, did not come back by lease expiry");
    }
}

/// `--once-empty` for a role with only the `consume` right on the queue (guide, "Security"), which
/// may not read jq_jobs: the worker drains the queue, a job scheduled for later included, and exits
/// 0, its drain check never refused.
#[test]
fn once_empty_needs_only_the_consume_right() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute("CREATE ROLE mailer LOGIN; SELECT jq_grant('mailer', 'emails', 'consume');").unwrap();
    let mut ids = enqueue(&mut client, "emails", 5);
    ids.push(
        client
            .query_one("SELECT jq_enqueue('emails', '{}', run_at => clock_timestamp() + interval '2 seconds')", &[])
            .unwrap()
            .get(0),
    );
    let refused = connect_as(&cluster, "postgres", "mailer")
        .query("SELECT 1 FROM jq_jobs", &[])
        .expect_err("a consumer may not read jq_jobs");
    assert_eq!(refused.code(), Some(&postgres::error::SqlState::INSUFFICIENT_PRIVILEGE));
    let dir = Scratch::new("consume");
    let dsn = cluster.dsn().replace("user=postgres", "user=mailer");
    let mut worker = Worker::start(&dsn, "emails", "m", &["--wait", "1", "--once-empty"], &dir, "cat >/dev/null");
    // A drain check the server refuses is logged, and the worker goes on claiming: wait for either.
    wait_until("the worker exits, or its drain check fails", || {
        worker.child.try_wait().unwrap().is_some() || worker.log().contains("drain check failed")
    });
    let log = worker.log();
    assert!(!log.contains("failed"), "{log}");
    assert!(worker.wait_exit(Duration::from_secs(60)).success(), "{log}");
    assert_eq!(statuses(&mut client, "emails"), BTreeMap::from([("succeeded".into(), 6)]));
    assert_eq!(sorted(worker.jobs("completed")), ids, "{log}");
}

/// `--once-empty` on a queue whose only job is held (guide, "Workflows"): the queue is not empty,
/// so the worker stays until the job it waits for is completed elsewhere, then runs it and leaves.
#[test]
fn once_empty_waits_while_a_job_is_held() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let parent: i64 = client.query_one("SELECT jq_enqueue('fetch', '{}')", &[]).unwrap().get(0);
    let child: i64 = client
        .query_one("SELECT jq_enqueue('merge', '{}', depends_on => ARRAY[$1::bigint])", &[&parent])
        .unwrap()
        .get(0);
    let dir = Scratch::new("held");
    let mut worker =
        Worker::start(&cluster.dsn(), "merge", "m", &["--wait", "1", "--once-empty"], &dir, "cat >/dev/null");
    // Several claims and drain checks find only the held job; a worker that took it for an empty
    // queue would have left by now.
    std::thread::sleep(Duration::from_secs(3));
    assert!(worker.child.try_wait().unwrap().is_none(), "the worker left a queue with a held job: {}", worker.log());
    client
        .batch_execute("SELECT jq_complete(id, 'elsewhere', lease_token) FROM jq_claim('fetch', 'elsewhere')")
        .unwrap();
    let log = worker.log();
    assert!(worker.wait_exit(Duration::from_secs(60)).success(), "{log}");
    assert_eq!(worker.jobs("completed"), vec![child], "{}", worker.log());
}

/// Exit 65 fails for good; another exit status, or death by a signal, is retried.
#[test]
fn exit_status_decides_retry_or_death() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute("INSERT INTO jq_queues (queue_name, backoff_base) VALUES ('f', '100 ms')").unwrap();
    let ids: Vec<i64> = ["bad", "flaky", "crashy"]
        .iter()
        .map(|kind| {
            client.query_one("SELECT jq_enqueue('f', jsonb_build_object('kind', $1::text))", &[kind]).unwrap().get(0)
        })
        .collect();
    let dir = Scratch::new("fail");
    let script = r#"p=$(cat)
        case "$p" in
          *bad*) echo "payload $p cannot be parsed" >&2; exit 65 ;;
          *flaky*) [ "$JQ_ATTEMPT" = 1 ] && { echo "upstream timed out" >&2; exit 3; } ;;
          *crashy*) [ "$JQ_ATTEMPT" = 1 ] && kill -9 $$ ;;
        esac
        exit 0"#;
    let mut worker = Worker::start(&cluster.dsn(), "f", "f", &["--wait", "1", "--once-empty"], &dir, script);
    assert!(worker.wait_exit(Duration::from_secs(60)).success(), "{}", worker.log());

    let job = |client: &mut Client, id: i64| -> (String, i32, Option<String>, Option<String>) {
        let row = client
            .query_one(
                "SELECT status::text, attempt_count, last_error_code, last_error_message FROM jq_jobs WHERE id = $1",
                &[&id],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2), row.get(3))
    };
    let (status, attempts, code, message) = job(&mut client, ids[0]);
    assert_eq!((status.as_str(), attempts, code.as_deref()), ("dead", 1, Some("EXIT_65")));
    assert_eq!(
        message.as_deref(),
        Some(r#"payload {"kind": "bad"} cannot be parsed"#),
        "the message is the command's stderr"
    );

    for (id, code, message) in [(ids[1], "EXIT_3", "upstream timed out"), (ids[2], "SIGNAL_9", "killed by signal 9")] {
        let (status, attempts, _, _) = job(&mut client, id);
        assert_eq!((status.as_str(), attempts), ("succeeded", 2), "job {id}");
        let events: Vec<(String, Option<String>, Option<String>)> = client
            .query("SELECT event, error_code, error_message FROM jq_job_events WHERE job_id = $1 ORDER BY id", &[&id])
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect();
        assert_eq!(events, vec![("failed".into(), Some(code.into()), Some(message.into()))], "job {id}");
    }
}

/// A job cancelled while its command runs: the next heartbeat is refused, the worker kills the
/// command with everything it started, and reports nothing; the job stays cancelled.
#[test]
fn a_lost_lease_kills_the_command() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let dir = Scratch::new("lost");
    let id = enqueue(&mut client, "lost", 1)[0];
    let script = "cat >/dev/null; sleep 30 & echo $$ $! > pids; wait; echo finished > finished";
    let mut worker =
        Worker::start(&cluster.dsn(), "lost", "l", &["--lease", "3", "--wait", "1", "--once-empty"], &dir, script);
    wait_until("the command runs", || std::fs::read_to_string(dir.join("pids")).is_ok_and(|s| s.ends_with('\n')));
    let pids: Vec<i32> =
        std::fs::read_to_string(dir.join("pids")).unwrap().split_whitespace().map(|p| p.parse().unwrap()).collect();
    assert!(client.query_one("SELECT jq_cancel($1)", &[&id]).unwrap().get::<_, bool>(0));

    assert!(worker.wait_exit(Duration::from_secs(20)).success(), "{}", worker.log());
    let log = worker.log();
    assert!(
        log.contains(&format!("lease lost on job {id} (lease token 1): heartbeat refused, command killed")),
        "{log}"
    );
    assert!(worker.jobs("completed").is_empty() && worker.jobs("failed").is_empty(), "{log}");
    wait_until_within("the command and its child are gone", Duration::from_secs(5), || {
        !pids.iter().any(|pid| alive(*pid))
    });
    assert!(!dir.join("finished").exists());
    let row = client.query_one("SELECT status::text, lease_owner FROM jq_jobs WHERE id = $1", &[&id]).unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, Option<String>>(1)), ("cancelled".into(), None));
    let events: Vec<String> = client
        .query("SELECT event FROM jq_job_events WHERE job_id = $1", &[&id])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(events, vec!["cancelled".to_string()]);
}

/// SIGTERM while a command outlives the grace: the command is killed and its job released at once,
/// pending with its attempt spent and the error code SHUTDOWN, claimable again right away.
#[test]
fn sigterm_past_the_grace_releases_the_job() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let dir = Scratch::new("grace");
    let id = enqueue(&mut client, "g", 1)[0];
    let mut worker =
        Worker::start(&cluster.dsn(), "g", "g", &["--grace", "1"], &dir, "cat >/dev/null; echo $$ > pid; sleep 30");
    wait_until("the command runs", || std::fs::read_to_string(dir.join("pid")).is_ok_and(|s| s.ends_with('\n')));
    let pid: i32 = std::fs::read_to_string(dir.join("pid")).unwrap().trim().parse().unwrap();
    let sent = Instant::now();
    worker.signal(libc::SIGTERM);
    let status = worker.wait_exit(Duration::from_secs(10));
    let took = sent.elapsed();
    assert!(status.success(), "exit {status}\n{}", worker.log());
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(5),
        "exited {took:?} after SIGTERM with a 1 s grace"
    );
    assert_eq!(worker.jobs("released"), vec![id], "{}", worker.log());
    assert!(!alive(pid), "the command outlived the worker");
    let row = client
        .query_one(
            "SELECT status::text, attempt_count, last_error_code, available_at <= clock_timestamp(), lease_owner IS NULL
             FROM jq_jobs WHERE id = $1",
            &[&id],
        )
        .unwrap();
    assert_eq!(
        (
            row.get::<_, String>(0),
            row.get::<_, i32>(1),
            row.get::<_, String>(2),
            row.get::<_, bool>(3),
            row.get::<_, bool>(4)
        ),
        ("pending".into(), 1, "SHUTDOWN".into(), true, true)
    );
}

/// The server crashes and restarts under a running worker: its slots reconnect (with backoff while
/// the server is down), the reports of jobs that ran meanwhile go through on the new connections,
/// and the queue drains. A claim whose answer was lost in the crash comes back by lease expiry.
#[test]
fn a_server_crash_costs_no_job() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "INSERT INTO jq_queues (queue_name, default_lease, backoff_base) VALUES ('r', '3 seconds', '100 ms')",
        )
        .unwrap();
    let dir = Scratch::new("restart");
    enqueue(&mut client, "r", 40);
    let flags = ["--concurrency", "2", "--wait", "1", "--once-empty"];
    let mut worker = Worker::start(&cluster.dsn(), "r", "r", &flags, &dir, "cat >/dev/null; sleep 0.2");
    wait_until("some jobs are done", || statuses(&mut client, "r").get("succeeded").is_some_and(|n| *n >= 10));
    cluster.crash_and_restart();
    assert!(worker.wait_exit(Duration::from_secs(90)).success(), "{}", worker.log());
    let mut client = cluster.connect();
    assert_eq!(statuses(&mut client, "r"), BTreeMap::from([("succeeded".into(), 40)]));
    assert!(worker.log().contains("reconnected"), "{}", worker.log());
}

/// A worker killed outright (SIGKILL, OOM) takes its running command with it, rather than leave it
/// running unsupervised while the job's lease expires and the job runs again elsewhere.
#[test]
fn a_killed_worker_takes_its_command_with_it() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let dir = Scratch::new("orphan");
    enqueue(&mut client, "orphan", 1);
    let worker = Worker::start(&cluster.dsn(), "orphan", "k", &[], &dir, "cat >/dev/null; echo $$ > pid; sleep 30");
    wait_until("the command runs", || std::fs::read_to_string(dir.join("pid")).is_ok_and(|s| s.ends_with('\n')));
    let pid: i32 = std::fs::read_to_string(dir.join("pid")).unwrap().trim().parse().unwrap();
    worker.signal(libc::SIGKILL); // the worker alone: the command runs in a process group of its own
    wait_until_within("the command is gone", Duration::from_secs(5), || !alive(pid));
}

/// With the waiting claim, an idle worker picks a new job up at once (its --poll of 30 s would
/// show), and SIGTERM cuts its waiting claim short.
#[test]
fn a_waiting_claim_wakes_for_new_work_and_yields_to_sigterm() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let dir = Scratch::new("wait");
    let mut worker =
        Worker::start(&cluster.dsn(), "wake", "w", &["--wait", "30", "--poll", "30"], &dir, "cat >/dev/null");
    std::thread::sleep(Duration::from_secs(1)); // the worker is now inside a waiting claim
    let id = enqueue(&mut client, "wake", 1)[0];
    let enqueued = Instant::now();
    wait_until("the job succeeds", || statuses(&mut client, "wake").contains_key("succeeded"));
    assert!(enqueued.elapsed() < Duration::from_secs(5), "picked up after {:?}", enqueued.elapsed());
    assert_eq!(worker.jobs("completed"), vec![id]);

    std::thread::sleep(Duration::from_millis(500)); // back inside a waiting claim
    let sent = Instant::now();
    worker.signal(libc::SIGTERM);
    assert!(worker.wait_exit(Duration::from_secs(10)).success(), "{}", worker.log());
    assert!(sent.elapsed() < Duration::from_secs(3), "a stop took {:?} with a 30 s wait", sent.elapsed());
    let log = worker.log();
    assert!(!log.contains("42883") && !log.contains("failed"), "{log}");
}

/// A server whose jq_claim has no `wait` argument (as before 0.2.0) answers the waiting claim with
/// SQLSTATE 42883: the worker falls back to plain claims and polling, and drains the queue all the
/// same. The old signature is stood in for by a four-argument wrapper, so that the test does not
/// depend on an old version's schema working with the current library.
#[test]
fn without_the_waiting_claim_the_worker_polls() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "ALTER FUNCTION jq_claim(text, text, interval, int, interval) RENAME TO jq_claim_waiting;
             CREATE FUNCTION jq_claim(text, text, interval DEFAULT NULL, int DEFAULT 1)
             RETURNS TABLE(id bigint, queue_name text, payload jsonb, priority int, attempt_count int,
                           max_attempts int, lease_token bigint, lease_expires_at timestamptz)
             LANGUAGE sql AS 'SELECT * FROM jq_claim_waiting($1, $2, $3, $4)';",
        )
        .unwrap();
    let ids = enqueue(&mut client, "old", 20);
    let dir = Scratch::new("old");
    let flags = ["--concurrency", "2", "--poll", "0.1", "--once-empty"];
    let mut worker = Worker::start(&cluster.dsn(), "old", "o", &flags, &dir, "cat >/dev/null");
    assert!(worker.wait_exit(Duration::from_secs(60)).success(), "{}", worker.log());
    let log = worker.log();
    assert!(log.contains("no wait argument (SQLSTATE 42883): polling every 100ms"), "{log}");
    assert_eq!(statuses(&mut client, "old"), BTreeMap::from([("succeeded".into(), 20)]));
    assert_eq!(sorted(worker.jobs("completed")), ids);
}

/// A command's stdout becomes the job's result (JSON as it is, other text as a JSON string); a
/// `JQ-PROGRESS` line is kept with the job, and a retried attempt gets it in JQ_PROGRESS; exit 75
/// snoozes the job (for a `JQ-SNOOZE` line's seconds), giving back its attempt.
#[test]
fn stdout_is_the_result_progress_lines_are_kept_and_exit_75_snoozes() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client.batch_execute("INSERT INTO jq_queues (queue_name, backoff_base) VALUES ('o', '100 ms')").unwrap();
    let job = |client: &mut Client, kind: &str, max_attempts: i32| -> i64 {
        client
            .query_one(
                "SELECT jq_enqueue('o', jsonb_build_object('kind', $1::text), max_attempts => $2)",
                &[&kind, &max_attempts],
            )
            .unwrap()
            .get(0)
    };
    let (json, text, resumed, snoozed) = (
        job(&mut client, "json", 8),
        job(&mut client, "text", 8),
        job(&mut client, "resume", 8),
        job(&mut client, "snooze", 1),
    );
    let dir = Scratch::new("output");
    let script = r#"p=$(cat)
        case "$p" in
          *json*) echo '{"sent": 3}' ;;
          *text*) echo "all done"; echo "twice" ;;
          *resume*)
            if [ "$JQ_ATTEMPT" = 1 ]; then echo 'JQ-PROGRESS {"page": 40}'; sleep 0.3; exit 3; fi
            echo "resumed from $JQ_PROGRESS" ;;
          *snooze*)
            if [ ! -e snoozed ]; then touch snoozed; echo 'JQ-SNOOZE 0'; exit 75; fi
            echo "ran after the snooze" ;;
        esac"#;
    let mut worker = Worker::start(&cluster.dsn(), "o", "o", &["--wait", "1", "--once-empty"], &dir, script);
    assert!(worker.wait_exit(Duration::from_secs(60)).success(), "{}", worker.log());

    let result = |client: &mut Client, id: i64| -> (String, Option<String>, i32) {
        let row = client
            .query_one("SELECT status::text, result::text, attempt_count FROM jq_jobs WHERE id = $1", &[&id])
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    assert_eq!(result(&mut client, json), ("succeeded".into(), Some(r#"{"sent": 3}"#.into()), 1));
    assert_eq!(result(&mut client, text), ("succeeded".into(), Some(r#""all done\ntwice""#.into()), 1));
    assert_eq!(
        result(&mut client, resumed),
        ("succeeded".into(), Some(r#""resumed from {\"page\": 40}""#.into()), 2),
        "the second attempt got the first one's progress"
    );
    let progress: String =
        client.query_one("SELECT progress::text FROM jq_jobs WHERE id = $1", &[&resumed]).unwrap().get(0);
    assert_eq!(progress, r#"{"page": 40}"#);
    // max_attempts 1: it could run again only because the snooze gave its attempt back.
    assert_eq!(result(&mut client, snoozed), ("succeeded".into(), Some(r#""ran after the snooze""#.into()), 1));
    let events: i64 = client
        .query_one("SELECT count(*) FROM jq_job_events WHERE job_id = $1 AND event = 'snoozed'", &[&snoozed])
        .unwrap()
        .get(0);
    assert_eq!(events, 1);
    assert!(worker.log().contains(&format!("snoozed job {snoozed} (lease token 1) for 0 s")), "{}", worker.log());
}
