//! The lifecycle broken at every boundary, against real servers. Each test says which
//! boundary it breaks and asserts on the final state of every job. Durations are printed, never
//! asserted. Boundaries 3, 7 and 8 are broken in lifecycle.rs and semantics.rs.

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use jq_harness::client::{claim, complete, drain, enqueue_many, live_jobs};
use jq_harness::history::{self, Failures, History};
use jq_harness::{wait_until, Client, Cluster};

fn job_state(client: &mut Client, id: i64) -> (String, i32, i64) {
    let row =
        client.query_one("SELECT status::text, attempt_count, lease_token FROM jq_jobs WHERE id = $1", &[&id]).unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// Reaps and claims until `worker` holds job `id` again (after its backoff); returns the new token.
fn reclaim(client: &mut Client, queue: &str, id: i64, worker: &str) -> i64 {
    let mut token = None;
    wait_until("the abandoned job is reaped and claimed again", || {
        client.query_one("SELECT jq_reap()", &[]).unwrap();
        token = claim(client, queue, worker, "1 minute").map(|(claimed, token)| {
            assert_eq!(claimed, id, "only the abandoned job is in the queue");
            token
        });
        if token.is_none() {
            thread::sleep(Duration::from_millis(50));
        }
        token.is_some()
    });
    token.unwrap()
}

/// The abandoned job `id` is reaped, claimed again by a rescuer and completed: its second attempt,
/// under a later fencing token (the second, or above a new token epoch after a server reset; see
/// guide, "Durable claims").
fn assert_rescued(client: &mut Client, queue: &str, id: i64) {
    let token = reclaim(client, queue, id, "rescuer");
    assert!(token >= 2, "the rescuer's token {token} is not above the abandoned one");
    assert!(complete(client, id, "rescuer", token));
    assert_eq!(job_state(client, id), ("succeeded".to_string(), 2, token));
}

/// Fault test 1 of DEVELOPMENT.md ("Commands and what the tests cover"): sixteen concurrent claimers, half taking one job at a time and half ten. Every
/// (job, lease_token) is granted once, and no claim ever waits on a row another holds. The server
/// logs every lock wait longer than 1 ms (`log_lock_waits`, `deadlock_timeout = '1ms'`) with its
/// statement; no such wait may be a claim's wait for a row (a lock on a transaction or a tuple).
/// Other waits a claim may meet are the server's own and not the claim's design (autovacuum's
/// truncation of the hot table's emptied end, or extending a table), so a lock_timeout, which
/// ends any wait, is not the test. One wait for a row is PostgreSQL's own as well, and is counted
/// and shown but allowed: the lock of a newer version of a row the claim found pending, which
/// PostgreSQL takes without SKIP LOCKED (guide, "jq_claim": its CONTEXT says "while locking updated
/// version").
#[test]
fn boundary_1_sixteen_claimers_grant_each_lease_once_without_waiting() {
    const JOBS: i32 = 4000;
    let cluster = Cluster::start_with(&["log_lock_waits = on", "deadlock_timeout = '1ms'"]);
    enqueue_many(&mut cluster.connect(), "many", JOBS);
    let claimers: Vec<_> = (0..16)
        .map(|w| {
            let mut client = cluster.connect();
            thread::spawn(move || {
                let (worker, batch) = (format!("w{w}"), if w % 2 == 0 { 1 } else { 10 });
                let mut grants = Vec::new();
                loop {
                    let rows = client
                        .query(
                            "SELECT id, lease_token FROM jq_claim('many', $1, interval '1 minute', $2)",
                            &[&worker, &batch],
                        )
                        .unwrap();
                    if rows.is_empty() {
                        return grants;
                    }
                    for row in rows {
                        let (id, token): (i64, i64) = (row.get(0), row.get(1));
                        // A completion may wait a moment: another claimer whose snapshot still saw
                        // this job pending can hold its row lock until that claim commits
                        // (claim.sql explains why).
                        assert!(client
                            .query_one("SELECT jq_complete($1, $2, $3)", &[&id, &worker, &token])
                            .unwrap()
                            .get::<_, bool>(0));
                        grants.push((id, token));
                    }
                }
            })
        })
        .collect();
    let grants: Vec<(i64, i64)> = claimers.into_iter().flat_map(|c| c.join().unwrap()).collect();
    let unique: HashSet<_> = grants.iter().collect();
    assert_eq!(unique.len(), grants.len(), "a (job, lease_token) was granted twice");
    assert_eq!(grants.len(), JOBS as usize);
    let row = cluster
        .connect()
        .query_one("SELECT count(*) FILTER (WHERE status = 'succeeded'), max(attempt_count) FROM jq_jobs", &[])
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i32>(1)), (JOBS as i64, 1));
    let (chain_waits, row_waits): (Vec<String>, Vec<String>) =
        claims_waiting_on_rows(&cluster.log()).into_iter().partition(|wait| wait.contains(UPDATE_CHAIN_WAIT));
    println!("{} claims waited while PostgreSQL locked a newer version of a row they skipped", chain_waits.len());
    assert!(row_waits.is_empty(), "claims waited on rows others held:\n{}", row_waits.join("\n"));
}

/// The CONTEXT of a wait in PostgreSQL's locking of a row's newer versions. A claim skips a row
/// whose version it sees another transaction is changing, unless that change commits in the
/// instant between the claim's look and its lock: PostgreSQL then goes on to lock the row's newer
/// versions, and waits for whoever holds one, SKIP LOCKED or not. The holder is another claim or
/// a completion, a statement already running; the claim's own design makes no such wait.
const UPDATE_CHAIN_WAIT: &str = "while locking updated version";

/// The lock waits in a server log (`log_lock_waits`) that a claim spent waiting on a row: on a
/// transaction (a row another transaction changed or locked) or on a tuple lock. Each wait's
/// entry ends with the STATEMENT it was in.
fn claims_waiting_on_rows(log: &str) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    let mut found = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        if !line.contains("still waiting for") || !(line.contains("on transaction") || line.contains("on tuple")) {
            continue;
        }
        // The entry's own lines follow (DETAIL, a CONTEXT of many lines, each continuation
        // indented), up to its STATEMENT; a line of another entry ends the search. The entry's
        // first lines are kept: its DETAIL and CONTEXT say which lock and which row.
        let mut entry = vec![*line];
        for next in lines[at + 1..].iter().filter(|next| !next.starts_with(char::is_whitespace)) {
            if next.contains("LOG:") {
                break;
            }
            entry.push(next);
            if next.contains("STATEMENT:") {
                if next.contains("jq_claim") {
                    found.push(entry.join("\n"));
                }
                break;
            }
        }
    }
    found
}

/// Fault test 2 of DEVELOPMENT.md ("Commands and what the tests cover"): the worker dies after its claim committed and before it worked, three ways: its
/// client process is SIGKILLed, its backend is terminated, its backend is killed with SIGKILL (which
/// makes PostgreSQL restart every backend). Each time the lease expires, the job is reaped and
/// claimed again, and the attempt is counted.
#[test]
fn boundary_2_a_worker_killed_after_its_claim_loses_nothing() {
    let cluster = Cluster::start();
    let mut observer = cluster.connect();

    // 2a. SIGKILL of the client process, a psql that claims and then would work for ten minutes.
    let id: i64 = observer.query_one("SELECT jq_enqueue('killed-client', '{}')", &[]).unwrap().get(0);
    let mut client_process = Command::new(jq_harness::pg_dir().join("bin/psql"))
        .args(["-X", "-q", "-h", "127.0.0.1", "-p", &cluster.port().to_string(), "-U", "postgres", "-d", "postgres"])
        .args([
            "-c",
            "SELECT id FROM jq_claim('killed-client', 'doomed', interval '1 second')",
            "-c",
            "SELECT pg_sleep(600)",
        ])
        .stdout(Stdio::null())
        .spawn()
        .expect("psql starts");
    wait_until("the doomed client's claim has committed", || job_state(&mut observer, id).0 == "running");
    client_process.kill().unwrap();
    client_process.wait().unwrap();
    assert_rescued(&mut observer, "killed-client", id);

    // 2b. pg_terminate_backend() of the worker's backend.
    let id: i64 = observer.query_one("SELECT jq_enqueue('terminated', '{}')", &[]).unwrap().get(0);
    let mut doomed = cluster.connect();
    let pid: i32 = doomed.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    claim(&mut doomed, "terminated", "doomed", "1 second").unwrap();
    let terminated: bool = observer.query_one("SELECT pg_terminate_backend($1)", &[&pid]).unwrap().get(0);
    assert!(terminated);
    assert!(doomed.query_one("SELECT 1", &[]).is_err(), "the doomed session is gone");
    assert_rescued(&mut observer, "terminated", id);

    // 2c. SIGKILL of the worker's backend: the postmaster resets every backend and recovers.
    let id: i64 = observer.query_one("SELECT jq_enqueue('killed-backend', '{}')", &[]).unwrap().get(0);
    let mut doomed = cluster.connect();
    let pid: i32 = doomed.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    // A claim that waits for its flush, so that it is certain to survive: one that does not may be
    // lost in the reset, which durability.rs tests.
    doomed.batch_execute("SET pg_jobqueue.async_claims = off").unwrap();
    claim(&mut doomed, "killed-backend", "doomed", "1 second").unwrap();
    let killed = Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    assert!(killed.success());
    drop(doomed);
    let mut observer = None;
    wait_until("the server has recovered from the killed backend", || {
        observer = cluster.try_connect();
        observer.as_mut().is_some_and(|c| c.query_one("SELECT 1", &[]).is_ok())
    });
    let mut observer = observer.unwrap();
    assert_eq!(job_state(&mut observer, id).0, "running", "the committed claim survived the reset");
    assert_rescued(&mut observer, "killed-backend", id);
}

/// Fault test 4 of DEVELOPMENT.md ("Commands and what the tests cover"): a worker crashes after an external side effect and before completing. The two
/// patterns the README teaches: (a) the job id as the idempotency key of the effect, so the retried
/// run leaves exactly one effect; (b) the effect written in the completing transaction, so it
/// happens exactly once, including when a stale worker tries again.
#[test]
fn boundary_4_side_effects_happen_once_with_either_pattern() {
    let cluster = Cluster::start();
    let mut setup = cluster.connect();
    setup
        .batch_execute(
            "CREATE TABLE external_effects (idempotency_key bigint PRIMARY KEY, done_by text);
             CREATE TABLE ledger (job_id bigint, amount int);",
        )
        .unwrap();

    // (a) The effect is outside the job's transaction; its key is the job id.
    let id: i64 = setup.query_one("SELECT jq_enqueue('effects', '{}')", &[]).unwrap().get(0);
    let mut first = cluster.connect();
    let (_, token) = claim(&mut first, "effects", "first", "1 second").unwrap();
    first
        .execute("INSERT INTO external_effects VALUES ($1, 'first') ON CONFLICT (idempotency_key) DO NOTHING", &[&id])
        .unwrap();
    drop(first); // crashes before jq_complete
    let mut second = cluster.connect();
    let retried = reclaim(&mut second, "effects", id, "second");
    assert!(retried > token);
    second
        .execute("INSERT INTO external_effects VALUES ($1, 'second') ON CONFLICT (idempotency_key) DO NOTHING", &[&id])
        .unwrap();
    assert!(complete(&mut second, id, "second", retried));
    let effects: i64 =
        second.query_one("SELECT count(*) FROM external_effects WHERE idempotency_key = $1", &[&id]).unwrap().get(0);
    assert_eq!(effects, 1);

    // (b) The effect commits with the completion, or not at all.
    let id: i64 = setup.query_one("SELECT jq_enqueue('ledger', '{}')", &[]).unwrap().get(0);
    let mut crashing = cluster.connect();
    let pid: i32 = crashing.query_one("SELECT pg_backend_pid()", &[]).unwrap().get(0);
    let (_, stale) = claim(&mut crashing, "ledger", "crashing", "1 second").unwrap();
    crashing.batch_execute("BEGIN").unwrap();
    crashing.execute("INSERT INTO ledger VALUES ($1, 100)", &[&id]).unwrap();
    setup.query_one("SELECT pg_terminate_backend($1)", &[&pid]).unwrap(); // dies before COMMIT
    let mut rescuer = cluster.connect();
    let token = reclaim(&mut rescuer, "ledger", id, "rescuer");
    let mut tx = rescuer.transaction().unwrap();
    tx.execute("INSERT INTO ledger VALUES ($1, 100)", &[&id]).unwrap();
    let done: bool = tx.query_one("SELECT jq_complete($1, 'rescuer', $2)", &[&id, &token]).unwrap().get(0);
    assert!(done);
    tx.commit().unwrap();
    // A stale worker comes back and tries the same thing: its completion is refused, so it rolls
    // back its effect, as the README teaches.
    let mut late = cluster.connect();
    let mut tx = late.transaction().unwrap();
    tx.execute("INSERT INTO ledger VALUES ($1, 100)", &[&id]).unwrap();
    let done: bool = tx.query_one("SELECT jq_complete($1, 'crashing', $2)", &[&id, &stale]).unwrap().get(0);
    assert!(!done);
    tx.rollback().unwrap();
    let entries: i64 = setup.query_one("SELECT count(*) FROM ledger WHERE job_id = $1", &[&id]).unwrap().get(0);
    assert_eq!(entries, 1);
    assert_eq!(job_state(&mut setup, id).0, "succeeded");
}

/// Fault test 5 on a queue that keeps nothing (guide, "Queues that keep nothing"): a worker whose
/// leases expired completes late, in the session that claimed the jobs, which completes jobs of
/// such a queue by the statements made for it (one DELETE, one job or a batch). Fencing holds
/// there as everywhere: the late completions are refused and delete nothing, and the rescuer's
/// delete the jobs with the events of the expired leases.
#[test]
fn boundary_5_a_late_completion_on_a_queue_that_keeps_nothing_is_refused() {
    let cluster = Cluster::start();
    let mut a = cluster.connect();
    a.batch_execute(r#"SELECT jq_configure('gone', '{"keep_succeeded": false}')"#).unwrap();
    a.batch_execute("SELECT jq_enqueue_batch('gone', ARRAY['{}', '{}']::jsonb[])").unwrap();
    let stale: Vec<(i64, i64)> = a
        .query("SELECT id, lease_token FROM jq_claim('gone', 'a', interval '100 milliseconds', 2) ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    assert_eq!(stale.len(), 2);
    thread::sleep(Duration::from_millis(150));
    let mut b = cluster.connect();
    let mut held: Vec<(i64, i64)> = Vec::new();
    wait_until("worker B claims both jobs", || {
        b.query_one("SELECT jq_reap()", &[]).unwrap();
        held.extend(
            b.query("SELECT id, lease_token FROM jq_claim('gone', 'b', interval '1 minute', 2)", &[])
                .unwrap()
                .iter()
                .map(|row| (row.get::<_, i64>(0), row.get::<_, i64>(1))),
        );
        held.len() == 2
    });
    held.sort_unstable();
    let ((one, one_stale), (two, two_stale)) = (stale[0], stale[1]);
    assert!(!complete(&mut a, one, "a", one_stale), "A's late completion must be refused");
    let late = a.query("SELECT * FROM jq_complete_batch($1, 'a', $2)", &[&vec![two], &vec![two_stale]]).unwrap();
    assert!(late.is_empty(), "and its late batch");
    for (id, token) in &held {
        assert_eq!(job_state(&mut b, *id), ("running".to_string(), 2, *token), "B still holds the job");
    }
    let events = "SELECT count(*) FROM jq_job_events WHERE job_id = ANY($1) AND event = 'lease_expired'";
    assert_eq!(b.query_one(events, &[&vec![one, two]]).unwrap().get::<_, i64>(0), 2);
    assert!(complete(&mut b, one, "b", held[0].1));
    let done = b.query("SELECT * FROM jq_complete_batch($1, 'b', $2)", &[&vec![two], &vec![held[1].1]]).unwrap();
    assert_eq!(done.len(), 1);
    let left = "SELECT (SELECT count(*) FROM jq_jobs WHERE id = ANY($1)) + (SELECT count(*) FROM jq_job_events WHERE job_id = ANY($1))";
    assert_eq!(b.query_one(left, &[&vec![one, two]]).unwrap().get::<_, i64>(0), 0, "forgotten, with their events");
}

/// Fault test 5 of DEVELOPMENT.md ("Commands and what the tests cover"): the worker's heartbeats stop while it keeps running the job. The background reaper
/// (200 ms interval) returns the job and another worker starts it, so for a while two workers run
/// it; fencing keeps the first one's late report out. Checked: the second never starts before the
/// first's last lease expired. Reported: the delay from that expiry to the second start (reaper
/// interval plus backoff at most), and how long both ran.
#[test]
fn boundary_5_stopped_heartbeats_bound_the_duplicate_window() {
    let cluster =
        Cluster::start_with(&["shared_preload_libraries = 'pg_jobqueue'", "pg_jobqueue.reaper_interval = '200ms'"]);
    let mut a = cluster.connect();
    let id: i64 = a.query_one("SELECT jq_enqueue('stuck', '{}')", &[]).unwrap().get(0);
    let (_, token) = claim(&mut a, "stuck", "a", "1 second").unwrap();
    for _ in 0..3 {
        thread::sleep(Duration::from_millis(300));
        let alive: bool = a.query_one("SELECT jq_heartbeat($1, 'a', $2)", &[&id, &token]).unwrap().get(0);
        assert!(alive);
    }
    // From here A keeps working but sends no more heartbeats.
    let last_expiry: f64 = a
        .query_one("SELECT extract(epoch FROM lease_expires_at)::float8 FROM jq_jobs WHERE id = $1", &[&id])
        .unwrap()
        .get(0);

    let mut b = cluster.connect();
    let mut b_token = None;
    wait_until("worker B claims the job", || {
        b_token = claim(&mut b, "stuck", "b", "1 minute").map(|(_, t)| t);
        if b_token.is_none() {
            thread::sleep(Duration::from_millis(20));
        }
        b_token.is_some()
    });
    let b_start: f64 =
        b.query_one("SELECT extract(epoch FROM claimed_at)::float8 FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get(0);
    thread::sleep(Duration::from_millis(300)); // both are running the job now
    let a_end: f64 = a.query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[]).unwrap().get(0);
    assert!(!complete(&mut a, id, "a", token), "A's late completion must be refused");
    let a_heartbeat: bool = a.query_one("SELECT jq_heartbeat($1, 'a', $2)", &[&id, &token]).unwrap().get(0);
    assert!(!a_heartbeat);
    assert!(complete(&mut b, id, "b", b_token.unwrap()));

    assert!(b_start >= last_expiry, "B started {} s before A's lease expired", last_expiry - b_start);
    println!(
        "stopped heartbeats (lease 1 s, reaper 200 ms): B started {:.3} s after A's lease expired; \
         both ran the job for {:.3} s, until A next reached the database",
        b_start - last_expiry,
        a_end - b_start
    );
    assert_eq!(job_state(&mut b, id), ("succeeded".to_string(), 2, 2));
}

/// Fault test 6 of DEVELOPMENT.md ("Commands and what the tests cover"): a job that always fails ends dead after exactly max_attempts attempts, with its whole
/// error history, and jq_retry brings it back with the same id.
#[test]
fn boundary_6_a_job_that_always_fails_dies_after_max_attempts_and_can_be_redriven() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let id: i64 = client.query_one("SELECT jq_enqueue('doomed', '{}', max_attempts => 3)", &[]).unwrap().get(0);
    let mut attempts = 0;
    while job_state(&mut client, id).0 != "dead" {
        let Some((claimed, token)) = claim(&mut client, "doomed", "w", "1 minute") else {
            thread::sleep(Duration::from_millis(20));
            continue;
        };
        attempts += 1;
        assert_eq!(claimed, id);
        let message = format!("attempt {attempts} failed");
        let failed: bool = client
            .query_one(
                "SELECT jq_fail($1, 'w', $2, 'ALWAYS', $3, retry_in => interval '10 ms')",
                &[&id, &token, &message],
            )
            .unwrap()
            .get(0);
        assert!(failed);
        assert!(attempts <= 3, "a fourth attempt was granted");
    }
    assert_eq!(attempts, 3);
    let history: Vec<(String, String, i32, String)> = client
        .query(
            "SELECT event, status::text, attempt, error_message FROM jq_job_events WHERE job_id = $1 ORDER BY id",
            &[&id],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let expected: Vec<(String, String, i32, String)> = (1..=3)
        .map(|n| ("failed".into(), if n < 3 { "pending" } else { "dead" }.into(), n, format!("attempt {n} failed")))
        .collect();
    assert_eq!(history, expected);

    let redriven: bool = client.query_one("SELECT jq_retry($1)", &[&id]).unwrap().get(0);
    assert!(redriven);
    assert_eq!(job_state(&mut client, id), ("pending".to_string(), 0, 3));
    let (again, token) = claim(&mut client, "doomed", "w", "1 minute").unwrap();
    assert_eq!((again, token), (id, 4), "same id, and the fencing token keeps growing");
    assert!(complete(&mut client, id, "w", token));
}

/// Fault test 9 of DEVELOPMENT.md ("Commands and what the tests cover"): no LISTEN, no wake-up of any kind: workers that only poll still drain every job a
/// producer commits while they run.
#[test]
fn boundary_9_polling_alone_drains_every_committed_job() {
    const JOBS: usize = 600;
    let cluster = Cluster::start();
    let producing = Arc::new(AtomicBool::new(true));
    let mut producer = cluster.connect();
    let producer_flag = producing.clone();
    let producer = thread::spawn(move || {
        let ids: Vec<i64> = (0..JOBS)
            .map(|n| {
                if n % 50 == 0 {
                    thread::sleep(Duration::from_millis(30));
                }
                producer.query_one("SELECT jq_enqueue('polled', '{}')", &[]).unwrap().get(0)
            })
            .collect();
        producer_flag.store(false, Ordering::SeqCst);
        ids
    });
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (mut client, producing) = (cluster.connect(), producing.clone());
            thread::spawn(move || {
                let worker = format!("poller-{w}");
                let mut done = Vec::new();
                loop {
                    let still_producing = producing.load(Ordering::SeqCst);
                    match claim(&mut client, "polled", &worker, "1 minute") {
                        Some((id, token)) => {
                            assert!(complete(&mut client, id, &worker, token));
                            done.push(id);
                        }
                        None if !still_producing => return done,
                        None => thread::sleep(Duration::from_millis(25)),
                    }
                }
            })
        })
        .collect();
    let enqueued: HashSet<i64> = producer.join().unwrap().into_iter().collect();
    let done: Vec<i64> = workers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    let done_set: HashSet<i64> = done.iter().copied().collect();
    assert_eq!(done.len(), done_set.len(), "a job was completed twice");
    assert_eq!(done_set, enqueued, "polling missed a committed job");
}

/// Fault test 10 of DEVELOPMENT.md ("Commands and what the tests cover"): a backlog of a million jobs. The claim and reaper plans stay on their indexes, and
/// 100,000 expired leases are recovered in a bounded number of passes (the time is reported).
#[test]
fn boundary_10_a_million_job_backlog_keeps_plans_and_recovers_in_bounded_passes() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "INSERT INTO jq_queue_ids (queue_name) VALUES ('big');
             INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts, created_at)
             SELECT (SELECT queue_id FROM jq_queue_ids WHERE queue_name = 'big'), '{}', i % 10,
                    now() - interval '1 minute', 8, now()
             FROM generate_series(1, 1000000) i;
             ANALYZE jq_live_jobs;",
        )
        .unwrap();
    let plan = |client: &mut Client, sql: &str| -> String {
        client.query(sql, &[]).unwrap().iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n")
    };
    client
        .batch_execute(&format!(
            "PREPARE claim(text, text, interval, int, timestamptz, int, bigint, int, timestamptz, bigint, interval, \
                           interval) AS {}{};
             PREPARE reap(int, timestamptz, text, bigint[], bigint) AS {};",
            // The claim statement, as src/api/claim/take.rs joins it for a queue without ordering keys.
            include_str!("../../../sql/queries/claim.sql")
                .replace("-- ordering key check", "AND j.ordering_key IS NULL"),
            include_str!("../../../sql/queries/parts/claim_update.sql"),
            include_str!("../../../sql/queries/reap.sql")
        ))
        .unwrap();
    let big: i32 = client.query_one("SELECT queue_id FROM jq_queue_ids WHERE queue_name = 'big'", &[]).unwrap().get(0);
    let claim_plan = plan(
        &mut client,
        &format!(
            "EXPLAIN EXECUTE claim('big', 'w', '60 s', 10, clock_timestamp(), {big}, 0, 2147483647, '-infinity', \
             -9223372036854775808, NULL, '5 minutes')"
        ),
    );
    assert!(
        claim_plan.contains("jq_live_jobs_claim") && !claim_plan.contains("Seq Scan on jq_live_jobs"),
        "{claim_plan}"
    );
    let reap_plan = plan(&mut client, "EXPLAIN EXECUTE reap(10000, clock_timestamp(), NULL, '{}', NULL)");
    assert!(
        reap_plan.contains("jq_live_jobs_running") && !reap_plan.contains("Seq Scan on jq_live_jobs"),
        "{reap_plan}"
    );

    // Claiming takes more than a second here; inline recovery would start reaping the first leases.
    client.batch_execute("SET pg_jobqueue.inline_reap_max = 0").unwrap();
    for _ in 0..100 {
        client.query("SELECT id FROM jq_claim('big', 'w', interval '1 second', 1000)", &[]).unwrap();
    }
    thread::sleep(Duration::from_millis(1100));
    let started = Instant::now();
    let (mut passes, mut reaped) = (0, 0);
    loop {
        let n: i32 = client.query_one("SELECT jq_reap(10000)", &[]).unwrap().get(0);
        passes += 1;
        reaped += n;
        if n == 0 {
            break;
        }
        assert!(passes <= 11, "more passes than 100,000 leases at 10,000 a pass need");
    }
    assert_eq!(reaped, 100_000);
    println!(
        "1M backlog: 100,000 expired leases reaped in {} passes of at most 10,000, {:.2} s",
        passes - 1,
        started.elapsed().as_secs_f64()
    );
}

/// Fault test 11 of DEVELOPMENT.md ("Commands and what the tests cover"): `pg_ctl stop -m immediate` while producers and workers run, then a restart. No
/// acknowledged enqueue or completion is lost, no job is left running without a lease that will
/// expire, and the queue drains.
#[test]
fn boundary_11_an_immediate_stop_loses_nothing_acknowledged() {
    let cluster = Cluster::start();
    let stop = Arc::new(AtomicBool::new(false));
    let enqueued = Arc::new(Mutex::new(Vec::<i64>::new()));
    let completed = Arc::new(Mutex::new(Vec::<i64>::new()));
    let mut threads = Vec::new();
    for _ in 0..2 {
        let (mut client, stop, enqueued) = (cluster.connect(), stop.clone(), enqueued.clone());
        threads.push(thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match client.query_one("SELECT jq_enqueue('crash', '{}')", &[]) {
                    Ok(row) => enqueued.lock().unwrap().push(row.get(0)),
                    Err(_) => return, // the server went away
                }
            }
        }));
    }
    for w in 0..4 {
        let (mut client, stop, completed) = (cluster.connect(), stop.clone(), completed.clone());
        threads.push(thread::spawn(move || {
            let worker = format!("w{w}");
            while !stop.load(Ordering::SeqCst) {
                let Ok(row) = client
                    .query_opt("SELECT id, lease_token FROM jq_claim('crash', $1, interval '2 seconds')", &[&worker])
                else {
                    return;
                };
                let Some(row) = row else { continue };
                let (id, token): (i64, i64) = (row.get(0), row.get(1));
                match client.query_one("SELECT jq_complete($1, $2, $3)", &[&id, &worker, &token]) {
                    Ok(r) if r.get::<_, bool>(0) => completed.lock().unwrap().push(id),
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        }));
    }
    thread::sleep(Duration::from_secs(2));
    cluster.crash_and_restart();
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().unwrap();
    }

    let mut client = cluster.connect();
    let (enqueued, completed) = (enqueued.lock().unwrap().clone(), completed.lock().unwrap().clone());
    assert!(!enqueued.is_empty() && !completed.is_empty(), "the crash came before any work");
    let present: i64 =
        client.query_one("SELECT count(*) FROM jq_jobs WHERE id = ANY($1)", &[&enqueued]).unwrap().get(0);
    assert_eq!(present as usize, enqueued.len(), "an acknowledged enqueue was lost");
    let succeeded: i64 = client
        .query_one("SELECT count(*) FROM jq_jobs WHERE id = ANY($1) AND status = 'succeeded'", &[&completed])
        .unwrap()
        .get(0);
    assert_eq!(succeeded as usize, completed.len(), "an acknowledged completion was lost");
    let unleased: i64 = client
        .query_one(
            "SELECT count(*) FROM jq_jobs WHERE status = 'running'
             AND (lease_expires_at IS NULL OR NOT isfinite(lease_expires_at))",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(unleased, 0, "a running job has no lease that will expire");
    drain(&mut client, "crash", |c| live_jobs(c, "crash"));
    let row =
        client.query_one("SELECT count(*), count(*) FILTER (WHERE status = 'succeeded') FROM jq_jobs", &[]).unwrap();
    assert_eq!(row.get::<_, i64>(0), row.get::<_, i64>(1), "after the restart the queue drains completely");
    println!(
        "immediate stop: {} acknowledged enqueues and {} acknowledged completions, all kept",
        enqueued.len(),
        completed.len()
    );
}

/// Fault test 11 again, for workflows (guide, "Workflows"): an immediate stop while dependencies complete.
/// Units of three dependencies and one job that depends on them; workers complete dependencies and
/// claim dependents until the server stops. After recovery every acknowledged completion is kept,
/// every held job awaits exactly its dependencies that have not succeeded, no dependent was
/// claimed before all of its dependencies had finished, and completing the rest releases every
/// dependent: none is stuck.
#[test]
fn boundary_11_an_immediate_stop_between_dependency_completions_keeps_every_count() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "DO $$
             DECLARE parents bigint[];
             BEGIN
                 FOR unit IN 1 .. 300 LOOP
                     parents := ARRAY(SELECT jq_enqueue_batch('inputs', array_fill('{}'::jsonb, ARRAY[3])));
                     PERFORM jq_enqueue('outputs', '{}', depends_on => parents);
                 END LOOP;
             END $$",
        )
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let completed = Arc::new(Mutex::new(Vec::<i64>::new()));
    let mut threads = Vec::new();
    for w in 0..4 {
        let (mut client, stop, completed) = (cluster.connect(), stop.clone(), completed.clone());
        // Three workers complete dependencies; one claims (and completes) the jobs they release.
        let queue = if w < 3 { "inputs" } else { "outputs" };
        threads.push(thread::spawn(move || {
            let worker = format!("w{w}");
            while !stop.load(Ordering::SeqCst) {
                let Ok(row) = client
                    .query_opt("SELECT id, lease_token FROM jq_claim($1, $2, interval '1 minute')", &[&queue, &worker])
                else {
                    return; // the server went away
                };
                let Some(row) = row else { continue };
                let (id, token): (i64, i64) = (row.get(0), row.get(1));
                match client.query_one("SELECT jq_complete($1, $2, $3)", &[&id, &worker, &token]) {
                    Ok(r) if r.get::<_, bool>(0) => completed.lock().unwrap().push(id),
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        }));
    }
    // The stop comes once some dependencies have completed, whatever the pace, and long before all
    // 900 have.
    wait_until("100 completions", || completed.lock().unwrap().len() >= 100);
    cluster.crash_and_restart();
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().unwrap();
    }

    let mut client = cluster.connect();
    let completed = completed.lock().unwrap().clone();
    let kept: i64 = client
        .query_one("SELECT count(*) FROM jq_jobs WHERE id = ANY($1) AND status = 'succeeded'", &[&completed])
        .unwrap()
        .get(0);
    assert_eq!(kept as usize, completed.len(), "an acknowledged completion was lost");
    // Each dependent's count against its dependencies as recovered, and its claim against theirs.
    let counts = "SELECT count(*) FILTER (WHERE j.status = 'pending' AND j.awaiting <> w.open),
                         count(*) FILTER (WHERE j.claimed_at IS NOT NULL AND (w.open > 0 OR w.last > j.claimed_at)),
                         count(*) FILTER (WHERE j.status = 'pending' AND j.awaiting > 0),
                         count(*) FILTER (WHERE j.claimed_at IS NOT NULL)
                  FROM jq_jobs j
                  CROSS JOIN LATERAL (
                      SELECT count(*) FILTER (WHERE p.status <> 'succeeded') AS open, max(p.finished_at) AS last
                      FROM jq_jobs p WHERE p.id = ANY (j.depends_on)) AS w
                  WHERE j.queue_name = 'outputs'";
    let row = client.query_one(counts, &[]).unwrap();
    let (miscounted, early, held, claimed): (i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(miscounted, 0, "a held job's count disagrees with its dependencies after recovery");
    assert_eq!(early, 0, "a dependent was claimed before its dependencies finished");
    assert!(held > 0 && !completed.is_empty(), "the stop came before any work, or after all of it");
    // The rest: the crashed workers' leases are reaped, every dependency completes, and then every
    // dependent runs.
    client
        .batch_execute("UPDATE jq_live_jobs SET lease_expires_at = clock_timestamp() WHERE status = 'running'")
        .unwrap();
    client.query_one("SELECT jq_reap()", &[]).unwrap();
    client.batch_execute("UPDATE jq_live_jobs SET available_at = clock_timestamp() WHERE status = 'pending'").unwrap();
    drain(&mut client, "inputs", |c| live_jobs(c, "inputs"));
    drain(&mut client, "outputs", |c| live_jobs(c, "outputs"));
    let row = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded') FROM jq_jobs WHERE queue_name = 'outputs'",
            &[],
        )
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), row.get::<_, i64>(1), "a dependent is stuck after the restart");
    assert_eq!(client.query_one("SELECT count(*) FROM jq_job_dependencies", &[]).unwrap().get::<_, i64>(0), 0);
    println!(
        "immediate stop among dependencies: {} completions acknowledged and kept, {held} jobs held then, {claimed} dependents claimed",
        completed.len()
    );
}

/// Fault test 12 of DEVELOPMENT.md ("Commands and what the tests cover"): a randomized history. Workers with random delays, stalls past their lease, crashes
/// (dropped connections) and very short leases, and a reaper running throughout, for a fixed number
/// of operations (JQ_SOAK_OPS, 1,500 by default; `make soak` runs more). Every grant and every
/// successful completion is recorded, then: no grant twice; at most one successful completion per
/// job; attempts within max_attempts; every job ends succeeded or dead; and the faults really fired
/// (stale completions were refused). The history and its checks are `jq_harness::history`'s, which
/// a_randomized_history_through_the_router_keeps_every_guarantee (router.rs) runs through the router.
/// Here it has workflows besides (guide, "Workflows"): jobs that depend on earlier ones, enqueued
/// before the workers start and by a producer while they run, whose dependencies are completed,
/// failed, reaped and expired by the history's faults. After the drain, none is held, none was
/// granted before its dependencies succeeded, and each one whose dependency failed is cancelled.
#[test]
fn boundary_12_a_randomized_history_keeps_every_guarantee() {
    let operations: usize = std::env::var("JQ_SOAK_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    let cluster = Cluster::start();
    let mut setup = cluster.connect();
    setup.batch_execute(history::QUEUE_SETTINGS).unwrap();
    // Enough jobs that a longer run means more faulted work, not more empty polls.
    let n = (operations / 5).max(300);
    let plain = history::enqueue_jobs(&mut setup, n as i32);
    let (dependents, ids) = history::enqueue_workflows(&mut setup, n / 5);

    let done = Arc::new(AtomicBool::new(false));
    let reaper = history::start_reaper(&cluster.dsn(), Failures::Fatal, done.clone());
    let producing = Arc::new(AtomicBool::new(false));
    let producer = history::start_producer(&cluster.dsn(), ids, n / 5, producing.clone());
    let workers = history::start_workers(&cluster.dsn(), operations, Failures::Fatal);
    let mut histories: Vec<History> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    producing.store(true, Ordering::SeqCst);
    let produced = producer.join().unwrap();
    histories.push(history::drain(&mut setup));
    done.store(true, Ordering::SeqCst);
    reaper.join().unwrap();

    let jobs = plain + dependents + produced.len();
    let summary = history::check(&histories, Vec::new(), &history::endings(&mut setup), jobs);
    println!("randomized history: {operations} operations on {summary}");
}
