//! The randomized fault history of fault test 12 (DEVELOPMENT.md, "Commands and what the tests cover"): workers with random
//! delays, stalls past their lease, dropped connections, very short leases, failures, heartbeats,
//! snoozes, progress reports and results, what each of them records, and the guarantees checked on
//! where every job ended. `boundary_12_a_randomized_history_keeps_every_guarantee` (faults.rs) runs
//! it against one server; `a_randomized_history_through_the_router_keeps_every_guarantee`
//! (router.rs) through the router, while one of its servers stops and starts again.
//!
//! Against one server the history also has workflows (guide, "Workflows"): jobs that depend on
//! earlier ones, enqueued before the workers start (`enqueue_workflows`) and while they run
//! (`start_producer`), so that enqueues race the completions, deaths, reaps and expiries of the
//! jobs they name. Only that test enqueues them; the history through the router has none.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use postgres::types::ToSql;
use postgres::{Client, NoTls, Row};

/// The queue's settings, made on each server: few attempts and short backoffs, so that jobs die and
/// come back within the run.
pub const QUEUE_SETTINGS: &str =
    "INSERT INTO jq_queues (queue_name, max_attempts, backoff_base, backoff_cap) VALUES ('chaos', 3, '20 ms', '200 ms')";

/// Enqueues the history's jobs into queue `chaos`, one call each (through the router, a batch would
/// land whole on one server): `n` plain ones, and `n / 5` with
/// a deadline, claimed first (a higher priority), of which some pass before a claim. Returns how
/// many.
pub fn enqueue_jobs(client: &mut Client, n: i32) -> usize {
    client
        .batch_execute(&format!(
            "SELECT jq_enqueue('chaos', '{{}}') FROM generate_series(1, {n});
             SELECT jq_enqueue('chaos', jsonb_build_object('n', i), priority => 1,
                               expires_at => clock_timestamp() + interval '200 ms' + i * interval '20 ms')
             FROM generate_series(1, {}) i",
            n / 5
        ))
        .unwrap();
    (n + n / 5) as usize
}

/// Jobs of queue `chaos` that depend on earlier ones (guide, "Workflows"), `n` of them, enqueued
/// after `enqueue_jobs` and before the workers start: each on one to three jobs picked among all
/// enqueued before it, the plain ones (which may die), those with a deadline (which may expire) and
/// earlier dependents (chains, down which a release or a failure travels). Every fifth call is a
/// batch of three that share their dependencies. Returns how many jobs, and every id of the queue
/// so far (for `start_producer`).
pub fn enqueue_workflows(client: &mut Client, n: usize) -> (usize, Vec<i64>) {
    let mut ids: Vec<i64> = client
        .query("SELECT id FROM jq_jobs WHERE queue_name = 'chaos' ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let (mut enqueued, mut calls) = (0, 0);
    while enqueued < n {
        let depends_on = pick_dependencies(&mut rng, &ids);
        let new = enqueue_dependent(client, &depends_on, calls % 5 == 4).unwrap();
        calls += 1;
        enqueued += new.len();
        ids.extend(new);
    }
    (enqueued, ids)
}

/// One to three distinct jobs among `ids`, for a new job to depend on.
fn pick_dependencies(rng: &mut Rng, ids: &[i64]) -> Vec<i64> {
    let mut depends_on: Vec<i64> = (0..1 + rng.below(3)).map(|_| ids[rng.below(ids.len() as u64) as usize]).collect();
    depends_on.sort_unstable();
    depends_on.dedup();
    depends_on
}

/// Enqueues a job of queue `chaos` depending on `depends_on`, or a batch of three; returns the ids.
fn enqueue_dependent(client: &mut Client, depends_on: &[i64], batch: bool) -> Result<Vec<i64>, postgres::Error> {
    let sql = if batch {
        "SELECT jq_enqueue_batch('chaos', array_fill(jsonb_build_object('depends_on', $1::bigint[]), ARRAY[3]),
                                 depends_on => $1)"
    } else {
        "SELECT jq_enqueue('chaos', jsonb_build_object('depends_on', $1::bigint[]), depends_on => $1)"
    };
    Ok(client.query(sql, &[&depends_on])?.iter().map(|row| row.get(0)).collect())
}

/// A producer that, until `done` or `n` jobs, enqueues a job depending on jobs of `ids` and on
/// those it enqueued, every 50 to 200 ms while the workers run: its enqueues mark jobs that are
/// pending, running, being completed, failed, reaped or expired at that moment (guide,
/// "Workflows"). Returns the ids it enqueued.
pub fn start_producer(dsn: &str, mut ids: Vec<i64>, n: usize, done: Arc<AtomicBool>) -> JoinHandle<Vec<i64>> {
    let mut client = Session::connect(dsn);
    thread::spawn(move || {
        let (mut rng, mut produced) = (Rng(0x9E6C_63D0_676A_9A99), Vec::new());
        while produced.len() < n && !done.load(Ordering::SeqCst) {
            thread::sleep(Duration::from_millis(50 + rng.below(150)));
            let depends_on = pick_dependencies(&mut rng, &ids);
            let new = enqueue_dependent(&mut client, &depends_on, rng.below(5) == 0)
                .unwrap_or_else(|e| panic!("an enqueue depending on {depends_on:?}: {e}"));
            produced.extend(&new);
            ids.extend(new);
        }
        produced
    })
}

/// Starts the history's six workers on queue `chaos`, which spend `operations` between them.
pub fn start_workers(dsn: &str, operations: usize, failures: Failures) -> Vec<JoinHandle<History>> {
    let (budget, sequence) = (Arc::new(AtomicUsize::new(operations)), Arc::new(AtomicUsize::new(0)));
    (0..6u64)
        .map(|w| {
            let (dsn, budget, sequence) = (dsn.to_owned(), budget.clone(), sequence.clone());
            thread::spawn(move || work(&dsn, w, &budget, &sequence, failures))
        })
        .collect()
}

/// A reaper that runs `jq_reap()` every 50 ms until `done`.
pub fn start_reaper(dsn: &str, failures: Failures, done: Arc<AtomicBool>) -> JoinHandle<()> {
    let mut session = Session { dsn: dsn.to_owned(), client: Session::connect(dsn), failures, failed_calls: 0 };
    thread::spawn(move || {
        while !done.load(Ordering::SeqCst) {
            session.query("SELECT jq_reap()", &[]);
            thread::sleep(Duration::from_millis(50));
        }
    })
}

/// A small deterministic random generator (xorshift), so each worker's choices replay from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What a worker does when a call fails.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Failures {
    /// Fail the test: against one running server, no call may fail.
    Fatal,
    /// Carry on, as a worker must while a server behind the router is down: a claim that fails is
    /// made again later; a report is sent again until it gets an answer (it is fenced, so sending
    /// it twice is harmless), or, after `REPORT_PATIENCE`, left to the lease's expiry.
    Retried,
}

/// How long a worker keeps sending a report that fails before it leaves the job to its lease.
const REPORT_PATIENCE: Duration = Duration::from_secs(60);

/// What one worker saw.
#[derive(Default)]
pub struct History {
    grants: Vec<(i64, i64)>,
    /// (job, the server's clock in microseconds right after the claim that granted it): the claim's
    /// snapshot was taken before, so whatever it saw committed, it saw stamped earlier.
    granted_at: Vec<(i64, i64)>,
    /// (job, token) of each successful completion, whose result names the token.
    completions: Vec<(i64, i64)>,
    /// (job, sequence) of each progress report accepted; a report carries its sequence number.
    progress: Vec<(i64, i64)>,
    /// (job, sequence) of progress reports whose first try failed and whose retry was refused: the
    /// first try may have been accepted before its answer was lost.
    progress_unknown: Vec<(i64, i64)>,
    snoozes: usize,
    stale_refused: usize,
    crashes: usize,
    failed_calls: usize,
}

/// A worker's connection, and what it does when a call fails.
struct Session {
    dsn: String,
    client: Client,
    failures: Failures,
    failed_calls: usize,
}

impl Session {
    fn connect(dsn: &str) -> Client {
        Client::connect(dsn, NoTls).unwrap()
    }

    /// A claim or another call that may simply be made again later: None if it failed.
    fn query(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Option<Vec<Row>> {
        match self.client.query(sql, params) {
            Ok(rows) => Some(rows),
            Err(e) if self.failures == Failures::Fatal => panic!("{sql}: {e}"),
            Err(_) => {
                self.failed(Duration::from_millis(20));
                None
            }
        }
    }

    /// A fenced report: its answer, once one comes (None: none came in time), and whether a try of
    /// it failed first.
    fn report(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> (Option<bool>, bool) {
        let (deadline, mut failed) = (Instant::now() + REPORT_PATIENCE, false);
        loop {
            match self.client.query_one(sql, params) {
                Ok(row) => return (Some(row.get(0)), failed),
                Err(e) if self.failures == Failures::Fatal => panic!("{sql}: {e}"),
                Err(_) if Instant::now() > deadline => return (None, true),
                Err(_) => {
                    failed = true;
                    self.failed(Duration::from_millis(100));
                }
            }
        }
    }

    fn failed(&mut self, pause: Duration) {
        self.failed_calls += 1;
        thread::sleep(pause);
        if self.client.is_closed() {
            self.client = Session::connect(&self.dsn);
        }
    }
}

/// One worker of the history, named `chaos-{w}`, until `budget` operations have been spent by all
/// workers together; `sequence` numbers the progress reports of all of them.
fn work(dsn: &str, w: u64, budget: &AtomicUsize, sequence: &AtomicUsize, failures: Failures) -> History {
    let mut session = Session { dsn: dsn.to_owned(), client: Session::connect(dsn), failures, failed_calls: 0 };
    let (mut rng, mut history) = (Rng(0x9E37_79B9_7F4A_7C15 ^ (w + 1)), History::default());
    let worker = format!("chaos-{w}");
    while budget.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |b| b.checked_sub(1)).is_ok() {
        let lease_ms = 150 + rng.below(300) as i32;
        let batch = 1 + rng.below(3) as i32;
        let rows = session.query(
            "SELECT id, lease_token, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
             FROM jq_claim('chaos', $1, make_interval(secs => $2::float8 / 1000), $3)",
            &[&worker, &(lease_ms as f64), &batch],
        );
        let Some(rows) = rows.filter(|rows| !rows.is_empty()) else {
            thread::sleep(Duration::from_millis(10));
            continue;
        };
        for row in rows {
            let (id, token): (i64, i64) = (row.get(0), row.get(1));
            history.grants.push((id, token));
            history.granted_at.push((id, row.get(2)));
            match rng.below(13) {
                0 => {
                    // crash: drop the connection with the job held
                    history.crashes += 1;
                    session.client = Session::connect(dsn);
                    break;
                }
                1 | 2 => thread::sleep(Duration::from_millis(lease_ms as u64 + 50 + rng.below(200))), // stall
                3 => {
                    let (failed, _) = session.report(
                        "SELECT jq_fail($1, $2, $3, 'RANDOM', retry_in => interval '10 ms')",
                        &[&id, &worker, &token],
                    );
                    if failed == Some(false) {
                        history.stale_refused += 1;
                    }
                    continue;
                }
                4 => {
                    session.report("SELECT jq_heartbeat($1, $2, $3)", &[&id, &worker, &token]);
                }
                5 => {
                    let (snoozed, _) =
                        session.report("SELECT jq_snooze($1, $2, $3, interval '10 ms')", &[&id, &worker, &token]);
                    match snoozed {
                        Some(true) => history.snoozes += 1,
                        Some(false) => history.stale_refused += 1,
                        None => {}
                    }
                    continue;
                }
                6 | 7 => {
                    let n = sequence.fetch_add(1, Ordering::SeqCst) as i64;
                    let (reported, retried) = session.report(
                        "SELECT jq_progress($1, $2, $3, jsonb_build_object('seq', $4::bigint))",
                        &[&id, &worker, &token, &n],
                    );
                    if reported == Some(true) {
                        history.progress.push((id, n));
                    } else if retried {
                        history.progress_unknown.push((id, n));
                    }
                }
                _ => thread::sleep(Duration::from_millis(rng.below(lease_ms as u64 / 2))),
            }
            let (completed, retried) = session.report(
                "SELECT jq_complete($1, $2, $3, result => jsonb_build_object('token', $3::bigint))",
                &[&id, &worker, &token],
            );
            // A refusal after a failed try may be the answer to that try's own completion: the
            // result, which names the token, tells.
            let completed = completed == Some(true) || retried && completed_under(&mut session, id, token);
            if completed {
                history.completions.push((id, token));
            } else {
                history.stale_refused += 1;
            }
        }
    }
    history.failed_calls = session.failed_calls;
    history
}

/// Claims and completes every job of queue `chaos` that is left, reaping as it goes, until none is
/// pending or running but those held by a dependency: with none of the history's faults, as
/// `client::drain` does, but recorded as the workers' are. A job still held then waits for jobs that
/// have all ended, and `check` says which (guide, "Workflows": none may be held forever).
pub fn drain(client: &mut Client) -> History {
    let mut history = History::default();
    crate::wait_until("the queue has drained", || {
        client.query_one("SELECT jq_reap()", &[]).unwrap();
        let rows = client
            .query(
                "SELECT id, lease_token, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
                 FROM jq_claim('chaos', 'drainer', interval '1 minute', 100)",
                &[],
            )
            .unwrap();
        for row in &rows {
            let (id, token): (i64, i64) = (row.get(0), row.get(1));
            history.grants.push((id, token));
            history.granted_at.push((id, row.get(2)));
            let sql = "SELECT jq_complete($1, 'drainer', $2, result => jsonb_build_object('token', $2::bigint))";
            if client.query_one(sql, &[&id, &token]).unwrap().get::<_, bool>(0) {
                history.completions.push((id, token));
            }
        }
        let live: i64 = client
            .query_one(
                "SELECT count(*) FROM jq_jobs
                 WHERE queue_name = 'chaos' AND status IN ('pending', 'running') AND awaiting = 0",
                &[],
            )
            .unwrap()
            .get(0);
        if live > 0 && rows.is_empty() {
            thread::sleep(Duration::from_millis(50));
        }
        live == 0
    });
    history
}

/// Whether job `id` succeeded under lease `token` (its result names the token of its completion).
fn completed_under(session: &mut Session, id: i64, token: i64) -> bool {
    let sql = "SELECT (result->>'token')::bigint FROM jq_result($1) WHERE status = 'succeeded'";
    let deadline = Instant::now() + REPORT_PATIENCE;
    loop {
        match session.client.query_opt(sql, &[&id]) {
            Ok(row) => return row.is_some_and(|row| row.get::<_, Option<i64>>(0) == Some(token)),
            Err(e) if Instant::now() > deadline => panic!("the result of job {id} could not be read: {e}"),
            Err(_) => session.failed(Duration::from_millis(100)),
        }
    }
}

/// Where a job ended, as its server keeps it.
pub struct Ending {
    id: i64,
    status: String,
    attempts: i32,
    max_attempts: i32,
    last_error_code: Option<String>,
    result_token: Option<i64>,
    progress: Option<i64>,
    claimed_in_time: bool,
    /// What it depends on (guide, "Workflows"), and how many of those it still awaited.
    depends_on: Vec<i64>,
    awaiting: i32,
    /// When it ended, in microseconds of the server's clock (stamped before its commit).
    finished_at: Option<i64>,
}

/// Where every job of the history on the server of `client` ended.
pub fn endings(client: &mut Client) -> Vec<Ending> {
    let rows = client
        .query(
            "SELECT id, status::text, attempt_count, max_attempts, last_error_code, (result->>'token')::bigint,
                    (progress->>'seq')::bigint, coalesce(claimed_at < expires_at, true),
                    coalesce(depends_on, '{}'), awaiting, (extract(epoch FROM finished_at) * 1000000)::bigint
             FROM jq_jobs WHERE queue_name = 'chaos'",
            &[],
        )
        .unwrap();
    rows.iter()
        .map(|row| Ending {
            id: row.get(0),
            status: row.get(1),
            attempts: row.get(2),
            max_attempts: row.get(3),
            last_error_code: row.get(4),
            result_token: row.get(5),
            progress: row.get(6),
            claimed_in_time: row.get(7),
            depends_on: row.get(8),
            awaiting: row.get(9),
            finished_at: row.get(10),
        })
        .collect()
}

impl Ending {
    pub fn id(&self) -> i64 {
        self.id
    }
}

/// The figures of a checked history, for the test's closing line.
pub struct Summary {
    jobs: usize,
    grants: usize,
    completions: usize,
    stale_refused: usize,
    crashes: usize,
    snoozes: usize,
    progress_reports: usize,
    failed_calls: usize,
    dead: usize,
    expired: usize,
    dependents: usize,
    released: usize,
    dependency_failed: usize,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "{} jobs, {} grants, {} successful completions, {} stale reports refused, {} crashes, {} snoozes, \
             {} progress reports, {} failed calls made again, {} jobs dead, {} expired; {} jobs with dependencies, \
             {} of them run once those succeeded, {} cancelled by one that failed",
            self.jobs,
            self.grants,
            self.completions,
            self.stale_refused,
            self.crashes,
            self.snoozes,
            self.progress_reports,
            self.failed_calls,
            self.dead,
            self.expired,
            self.dependents,
            self.released,
            self.dependency_failed
        )
    }
}

/// Checks every guarantee on the workers' histories, the drainer's completions and where the jobs
/// ended: no (job, lease_token) granted twice; at most one successful completion per job; attempts
/// within max_attempts; every job succeeded, dead or cancelled by its deadline (never claimed after
/// it); a succeeded job's result is its completion's; each job's progress is the last one accepted;
/// and the faults really fired (stale reports were refused). And for jobs with dependencies (guide,
/// "Workflows"): `awaiting` is never below 0; none is left held; one whose dependencies all
/// succeeded has run, and no claim granted it before the last of them was completed; one with a
/// dependency that died, expired or was cancelled is cancelled, DEPENDENCY_FAILED, and was never
/// granted; and both kinds happened.
pub fn check(histories: &[History], drained: Vec<i64>, endings: &[Ending], jobs: usize) -> Summary {
    let grants: Vec<(i64, i64)> = histories.iter().flat_map(|h| h.grants.iter().copied()).collect();
    let mut completions: Vec<i64> = drained;
    let tokens: HashMap<i64, i64> = histories.iter().flat_map(|h| h.completions.iter().copied()).collect();
    completions.extend(histories.iter().flat_map(|h| h.completions.iter().map(|(id, _)| *id)));
    // The last progress report the server accepted for each job: reports of one job are made by
    // its lease holders one after another, so the highest sequence number is the last.
    let mut last_progress: HashMap<i64, i64> = HashMap::new();
    for (id, n) in histories.iter().flat_map(|h| h.progress.iter().copied()) {
        let last = last_progress.entry(id).or_insert(n);
        *last = (*last).max(n);
    }
    let unknown_progress: HashSet<(i64, i64)> =
        histories.iter().flat_map(|h| h.progress_unknown.iter().copied()).collect();
    let stale_refused: usize = histories.iter().map(|h| h.stale_refused).sum();
    let mut granted_at: HashMap<i64, Vec<i64>> = HashMap::new();
    for (id, at) in histories.iter().flat_map(|h| h.granted_at.iter().copied()) {
        granted_at.entry(id).or_default().push(at);
    }
    let by_id: HashMap<i64, &Ending> = endings.iter().map(|job| (job.id, job)).collect();

    let unique: HashSet<_> = grants.iter().collect();
    assert_eq!(unique.len(), grants.len(), "a (job, lease_token) was granted twice");
    let mut per_job: HashMap<i64, usize> = HashMap::new();
    for id in &completions {
        *per_job.entry(*id).or_default() += 1;
    }
    assert!(per_job.values().all(|&n| n == 1), "a job was completed successfully twice");
    assert_eq!(endings.len(), jobs);
    let (mut dead, mut expired) = (0, 0);
    let (mut dependents, mut released, mut dependency_failed) = (0, 0, 0);
    for job in endings {
        let id = job.id;
        assert!(job.attempts <= job.max_attempts, "job {id}: {} attempts of {}", job.attempts, job.max_attempts);
        assert!(job.awaiting >= 0, "job {id} awaits {} dependencies", job.awaiting);
        // A report whose answer was lost may have been the last accepted, if it came after it.
        let accepted = last_progress.get(&id).copied();
        let lost_answer = job.progress.is_some_and(|n| unknown_progress.contains(&(id, n)) && Some(n) > accepted);
        assert!(job.progress == accepted || lost_answer, "job {id}: its progress is not the last one accepted");
        assert!(job.claimed_in_time, "job {id} was claimed after its expires_at");
        match job.status.as_str() {
            "succeeded" => {
                assert_eq!(per_job.get(&id), Some(&1), "job {id} succeeded without a recorded completion");
                if let Some(token) = tokens.get(&id) {
                    assert_eq!(job.result_token, Some(*token), "job {id}: the result is not its completion's");
                }
            }
            "dead" => {
                dead += 1;
                assert_eq!(per_job.get(&id), None, "job {id} is dead but was completed");
            }
            "cancelled" if job.last_error_code.as_deref() == Some("DEPENDENCY_FAILED") => {
                // Which dependency failed is checked below.
                dependency_failed += 1;
                assert!(!job.depends_on.is_empty(), "job {id} was cancelled by a dependency it does not have");
            }
            "cancelled" => {
                expired += 1;
                assert_eq!(
                    job.last_error_code.as_deref(),
                    Some("EXPIRED"),
                    "job {id} was cancelled, not by its deadline"
                );
                assert_eq!(per_job.get(&id), None, "job {id} expired but was completed");
            }
            "pending" if job.awaiting > 0 => {
                let ended: Vec<String> = job.depends_on.iter().map(|d| format!("{d} {}", by_id[d].status)).collect();
                panic!(
                    "job {id} is held forever, awaiting {} of its dependencies, which ended: {ended:?}",
                    job.awaiting
                )
            }
            other => panic!("job {id} ended {other}"),
        }
        if job.depends_on.is_empty() {
            continue;
        }
        dependents += 1;
        let grants = granted_at.get(&id).map_or(&[][..], Vec::as_slice);
        match job.depends_on.iter().map(|d| by_id[d]).find(|dependency| dependency.status != "succeeded") {
            None => {
                released += 1;
                assert!(
                    job.status == "succeeded" || job.status == "dead",
                    "job {id}: its dependencies all succeeded, yet it ended {} without running",
                    job.status
                );
                let last = job.depends_on.iter().map(|d| by_id[d].finished_at.unwrap()).max().unwrap();
                if let Some(early) = grants.iter().find(|&&at| at <= last) {
                    panic!("job {id} was granted at {early} µs, before its last dependency was completed at {last} µs");
                }
            }
            Some(failed) => {
                assert_eq!(
                    (job.status.as_str(), job.last_error_code.as_deref()),
                    ("cancelled", Some("DEPENDENCY_FAILED")),
                    "job {id}: its dependency {} ended {}",
                    failed.id,
                    failed.status
                );
                assert!(
                    grants.is_empty() && job.attempts == 0,
                    "job {id} was granted though job {} ended {}",
                    failed.id,
                    failed.status
                );
            }
        }
    }
    assert!(stale_refused > 0, "no stale report was refused: the faults did not fire");
    if dependents > 0 {
        assert!(released > 0, "no job with dependencies ran: the workflows were not exercised");
        assert!(dependency_failed > 0, "no dependency failed: the workflows' failures were not exercised");
    }
    Summary {
        jobs,
        grants: grants.len(),
        completions: completions.len(),
        stale_refused,
        crashes: histories.iter().map(|h| h.crashes).sum(),
        snoozes: histories.iter().map(|h| h.snoozes).sum(),
        progress_reports: last_progress.len(),
        failed_calls: histories.iter().map(|h| h.failed_calls).sum(),
        dead,
        expired,
        dependents,
        released,
        dependency_failed,
    }
}
