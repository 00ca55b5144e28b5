//! jq-worker: runs a command for each job of one pg_jobqueue queue. Each slot claims a job, runs
//! the command with the payload on stdin, heartbeats while it runs (and passes on the progress
//! lines of its stdout), and reports the exit status with jq_complete (its stdout the result),
//! jq_snooze or jq_fail. See worker/README.md.

mod metrics;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use postgres::error::SqlState;
use postgres::{CancelToken, Client, Config, NoTls};

const USAGE: &str = "usage: jq-worker --dsn DSN --queue Q [--name NAME] [--concurrency N] [--lease SECS] \
[--wait SECS] [--poll SECS] [--grace SECS] [--snooze SECS] [--result-bytes N] [--once-empty] \
[--metrics ADDRESS] -- COMMAND [ARGS...]";

/// EX_DATAERR from sysexits.h: the payload is bad and will not improve, so the job dies at once.
const EXIT_PERMANENT: i32 = 65;
/// EX_TEMPFAIL from sysexits.h: the job cannot run yet; it is snoozed, its attempt given back.
const EXIT_SNOOZE: i32 = 75;
/// How much of the end of a command's stderr becomes the job's error message.
const STDERR_TAIL: usize = 1000;
/// A stdout line starting so reports progress: the rest is a JSON value (jq_progress).
const PROGRESS_LINE: &str = "JQ-PROGRESS ";
/// A stdout line starting so sets how long an exit 75 snoozes the job, in seconds.
const SNOOZE_LINE: &str = "JQ-SNOOZE ";

const WAITING_CLAIM: &str = "SELECT id, payload::text, attempt_count, lease_token, \
     extract(epoch FROM lease_expires_at - clock_timestamp())::float8 \
     FROM jq_claim($1, $2, make_interval(secs => $3), 1, wait => make_interval(secs => $4))";
const PLAIN_CLAIM: &str = "SELECT id, payload::text, attempt_count, lease_token, \
     extract(epoch FROM lease_expires_at - clock_timestamp())::float8 \
     FROM jq_claim($1, $2, make_interval(secs => $3), 1)";
/// No pending (claimable now or scheduled), held (guide, "Workflows") or running job. Read from
/// jq_queue_stats, whose row of the queue every right on it shows (guide, "Security"): a role with
/// only `consume` may not read jq_jobs. Held jobs are read through the row as JSON, so that the
/// check also runs against releases before workflows, whose view has no such column.
const QUEUE_DRAINED: &str = "SELECT NOT EXISTS (SELECT 1 FROM jq_queue_stats s \
     WHERE queue_name = $1 AND pending + scheduled + running \
     + coalesce((to_jsonb(s) ->> 'held_by_dependency')::bigint, 0) > 0)";

struct Options {
    dsn: Config,
    queue: String,
    name: String,
    concurrency: usize,
    /// None: the queue's default lease.
    lease: Option<f64>,
    /// 0: plain claims only.
    wait: f64,
    poll: Duration,
    grace: Duration,
    /// How long an exit 75 snoozes the job when the command did not say.
    snooze: f64,
    /// How much of the command's stdout becomes the job's result; 0: none.
    result_bytes: usize,
    once_empty: bool,
    /// Where to serve jq_metrics() for a Prometheus scrape (metrics.rs); None: nowhere.
    metrics: Option<String>,
    command: Vec<String>,
}

struct Shared {
    opts: Options,
    stop: Arc<AtomicBool>,
    /// Per slot, the cancel token of its connection while a waiting claim is in flight, so that a
    /// stop can cut the wait short.
    claims: Vec<Mutex<Option<CancelToken>>>,
}

fn main() {
    let opts = match parse_args(std::env::args().skip(1).collect()) {
        Ok(opts) => opts,
        Err(message) => {
            eprintln!("jq-worker: {message}\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Some(address) = &opts.metrics {
        // Bound before any slot starts, so that an address in use is an error of the arguments.
        match std::net::TcpListener::bind(address) {
            Ok(listener) => {
                let name = opts.name.clone();
                metrics::serve(listener, opts.dsn.clone(), move |message| log(&name, message));
            }
            Err(error) => {
                eprintln!("jq-worker: --metrics {address}: {error}");
                std::process::exit(2);
            }
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // The first signal asks for a graceful stop; a second one while stopping exits at once.
        signal_hook::flag::register_conditional_shutdown(signal, 1, stop.clone()).expect("install signal handler");
        signal_hook::flag::register(signal, stop.clone()).expect("install signal handler");
    }
    let name = opts.name.clone();
    let claims = (0..opts.concurrency).map(|_| Mutex::new(None)).collect();
    let shared = Arc::new(Shared { opts, stop, claims });
    log(&name, &format!("started: queue {}, {} slot(s)", shared.opts.queue, shared.opts.concurrency));

    let slots: Vec<_> = (0..shared.opts.concurrency)
        .map(|index| {
            let shared = shared.clone();
            thread::spawn(move || Slot::new(shared, index).run())
        })
        .collect();
    let mut stop_seen = false;
    while !slots.iter().all(|slot| slot.is_finished()) {
        if shared.stop.load(Ordering::SeqCst) {
            if !stop_seen {
                stop_seen = true;
                log(&name, &format!("stopping: no new claims, running commands get {:?}", shared.opts.grace));
            }
            // Repeated while slots remain: a cancel that reaches an idle connection, just before its
            // claim is sent, is dropped by the server.
            for claim in &shared.claims {
                let token = claim.lock().unwrap().clone();
                if let Some(token) = token {
                    let _ = token.cancel_query(NoTls);
                }
            }
        }
        thread::sleep(Duration::from_millis(100));
    }
    let panicked = slots.into_iter().map(|slot| slot.join()).filter(Result::is_err).count();
    log(&name, "stopped");
    std::process::exit(if panicked > 0 { 1 } else { 0 });
}

fn parse_args(args: Vec<String>) -> Result<Options, String> {
    let (mut dsn, mut queue, mut name, mut lease) = (None, None, None, None);
    let (mut concurrency, mut wait, mut poll, mut grace, mut once_empty) = (1, 5.0, 1.0, 30.0, false);
    let (mut snooze, mut result_bytes) = (60.0, 64 * 1024);
    let (mut command, mut metrics) = (Vec::new(), None);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--" => {
                command = args.by_ref().collect();
                break;
            }
            "--once-empty" => {
                once_empty = true;
                continue;
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => {}
        }
        let (flag, value) = match arg.split_once('=') {
            Some((flag, value)) => (flag.to_string(), value.to_string()),
            None => {
                let value = args.next().ok_or(format!("{arg} needs a value"))?;
                (arg, value)
            }
        };
        match flag.as_str() {
            "--dsn" => dsn = Some(value),
            "--queue" => queue = Some(value),
            "--name" => name = Some(value),
            "--concurrency" => {
                concurrency = value.parse().ok().filter(|n| *n >= 1).ok_or("--concurrency must be 1 or more")?
            }
            "--lease" => lease = Some(seconds(&flag, &value, false)?),
            "--wait" => wait = seconds(&flag, &value, true)?,
            "--poll" => poll = seconds(&flag, &value, false)?,
            "--grace" => grace = seconds(&flag, &value, true)?,
            "--snooze" => snooze = seconds(&flag, &value, true)?,
            "--result-bytes" => result_bytes = value.parse().map_err(|_| "--result-bytes must be a number of bytes")?,
            "--metrics" => metrics = Some(value),
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    let dsn = dsn.ok_or("--dsn is required")?;
    let mut dsn: Config = dsn.parse().map_err(|e| format!("--dsn: {e}"))?;
    if dsn.get_connect_timeout().is_none() {
        // A slot blocked in a connection attempt neither heartbeats nor notices a stop.
        dsn.connect_timeout(Duration::from_secs(5));
    }
    if command.is_empty() {
        return Err("a command is required after --".into());
    }
    Ok(Options {
        dsn,
        queue: queue.ok_or("--queue is required")?,
        name: name.unwrap_or_else(|| format!("{}-{}", hostname(), std::process::id())),
        concurrency,
        lease,
        wait,
        poll: Duration::from_secs_f64(poll),
        grace: Duration::from_secs_f64(grace),
        snooze,
        result_bytes,
        once_empty,
        metrics,
        command,
    })
}

fn seconds(flag: &str, value: &str, zero_allowed: bool) -> Result<f64, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && (*s > 0.0 || zero_allowed && *s == 0.0))
        .ok_or(format!("{flag} takes a number of seconds, not {value:?}"))
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let len = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    if ok && len > 0 {
        String::from_utf8_lossy(&buf[..len]).into_owned()
    } else {
        "localhost".into()
    }
}

fn log(who: &str, message: &str) {
    eprintln!("{} {who}: {message}", humantime::format_rfc3339_millis(SystemTime::now()));
}

struct Job {
    id: i64,
    payload: String,
    attempt: i32,
    token: i64,
    lease: Duration,
}

enum Outcome {
    /// With the command's stdout as the result: a JSON text, or none.
    Completed(Option<String>),
    /// Exit 75: pending again after this many seconds, the attempt given back.
    Snoozed(f64),
    Failed {
        code: String,
        message: String,
        retryable: bool,
    },
    /// Grace ran out during a stop: the job goes back to pending at once.
    Released,
}

struct Slot {
    shared: Arc<Shared>,
    index: usize,
    worker: String,
    config: Config,
    db: Option<Client>,
    /// Set when a connection was lost or refused, to log the reconnection.
    reconnecting: bool,
    waiting_claims: bool,
}

impl Slot {
    fn new(shared: Arc<Shared>, index: usize) -> Slot {
        let worker = format!("{}/slot-{index}", shared.opts.name);
        let mut config = shared.opts.dsn.clone();
        if config.get_application_name().is_none() {
            config.application_name(&worker);
        }
        let waiting_claims = shared.opts.wait > 0.0;
        Slot { shared, index, worker, config, db: None, reconnecting: false, waiting_claims }
    }

    fn run(mut self) {
        let mut backoff = Duration::from_millis(500);
        while !self.stopping() {
            match self.claim() {
                Ok(Some(job)) => self.run_job(job),
                Ok(None) => {
                    if self.shared.opts.once_empty && self.queue_drained() {
                        self.log("queue drained, slot done");
                        break;
                    }
                    if !self.waiting_claims {
                        self.pause(self.shared.opts.poll);
                    }
                }
                Err(e) => {
                    self.failed("claim", &e);
                    self.pause(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(10));
                    continue;
                }
            }
            backoff = Duration::from_millis(500);
        }
    }

    fn stopping(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }

    fn log(&self, message: &str) {
        log(&self.worker, message);
    }

    /// Sleeps, waking early for a stop.
    fn pause(&self, duration: Duration) {
        let until = Instant::now() + duration;
        while !self.stopping() && Instant::now() < until {
            thread::sleep(Duration::from_millis(50).min(until - Instant::now()));
        }
    }

    /// The connection, made anew after one was lost.
    fn db(&mut self) -> Result<&mut Client, postgres::Error> {
        if self.db.is_none() {
            self.db = Some(self.config.connect(NoTls)?);
            if std::mem::take(&mut self.reconnecting) {
                self.log("reconnected");
            }
        }
        Ok(self.db.as_mut().expect("connected above"))
    }

    /// Logs a failed statement, and drops the connection unless the server answered on it, so that
    /// the next statement reconnects.
    fn failed(&mut self, what: &str, e: &postgres::Error) {
        let alive = e.as_db_error().is_some() && self.db.as_ref().is_some_and(|db| !db.is_closed());
        if !alive {
            self.db = None;
            self.reconnecting = true;
        }
        // A stop cancels waiting claims on purpose.
        if !(self.stopping() && e.code() == Some(&SqlState::QUERY_CANCELED)) {
            self.log(&format!("{what} failed: {}", describe(e)));
        }
    }

    fn claim(&mut self) -> Result<Option<Job>, postgres::Error> {
        let shared = self.shared.clone();
        let (queue, lease, worker) = (&shared.opts.queue, &shared.opts.lease, self.worker.clone());
        if self.waiting_claims {
            let token = self.db()?.cancel_token();
            *shared.claims[self.index].lock().unwrap() = Some(token);
            let result = if self.stopping() {
                Ok(Vec::new())
            } else {
                self.db()?.query(WAITING_CLAIM, &[queue, &worker, lease, &shared.opts.wait])
            };
            *shared.claims[self.index].lock().unwrap() = None;
            match result {
                Err(e) if e.code() == Some(&SqlState::UNDEFINED_FUNCTION) => {
                    self.waiting_claims = false;
                    self.log(&format!(
                        "jq_claim here has no wait argument (SQLSTATE 42883): polling every {:?} instead",
                        shared.opts.poll
                    ));
                }
                result => return Ok(result?.first().map(job_from_row)),
            }
        }
        let rows = self.db()?.query(PLAIN_CLAIM, &[queue, &worker, lease])?;
        Ok(rows.first().map(job_from_row))
    }

    fn queue_drained(&mut self) -> bool {
        let queue = self.shared.opts.queue.clone();
        match self.db().and_then(|db| db.query_one(QUEUE_DRAINED, &[&queue])) {
            Ok(row) => row.get(0),
            Err(e) => {
                self.failed("drain check", &e);
                false
            }
        }
    }

    fn run_job(&mut self, job: Job) {
        self.log(&format!("claimed job {} (attempt {}, lease token {})", job.id, job.attempt, job.token));
        // Until when the lease is known to hold: the last claim or heartbeat the server confirmed.
        let mut lease_until = Instant::now() + job.lease;
        // A retried attempt resumes from the last progress report, if there was one.
        let resume = if job.attempt > 1 { self.progress_of(&job) } else { None };
        let mut child = match self.spawn(&job, resume.as_deref()) {
            Ok(child) => child,
            Err(e) => {
                let failure = Outcome::Failed { code: "SPAWN_FAILED".into(), message: e.to_string(), retryable: true };
                return self.report(&job, failure, lease_until);
            }
        };
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let payload = job.payload.clone();
        // Written from a thread: a command that never reads its stdin must not stop the heartbeats.
        thread::spawn(move || {
            let _ = stdin.write_all(payload.as_bytes());
        });
        let tail = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let (stderr, tail) = (child.stderr.take().expect("stderr is piped"), tail.clone());
            let prefix = format!("job {}: ", job.id);
            thread::spawn(move || pass_stderr(stderr, &prefix, &tail))
        };
        let output = Arc::new(Mutex::new(Output::default()));
        let stdout_reader = {
            let (stdout, output) = (child.stdout.take().expect("stdout is piped"), output.clone());
            let keep = self.shared.opts.result_bytes;
            thread::spawn(move || read_stdout(stdout, keep, &output))
        };

        let interval = job.lease / 3;
        let mut next_heartbeat = Instant::now() + interval;
        let mut grace_until = None;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for the command") {
                break status;
            }
            let now = Instant::now();
            if self.stopping() && now >= *grace_until.get_or_insert(now + self.shared.opts.grace) {
                kill_group(&mut child);
                return self.report(&job, Outcome::Released, lease_until);
            }
            let report = output.lock().unwrap().progress.take();
            if let Some(progress) = report {
                match self.progress(&job, &progress) {
                    Ok(true) => {
                        lease_until = now + job.lease;
                        next_heartbeat = now + interval;
                    }
                    Ok(false) => {
                        kill_group(&mut child);
                        return self.log(&format!(
                            "lease lost on job {} (lease token {}): progress refused, command killed",
                            job.id, job.token
                        ));
                    }
                    Err(e) => self.failed(&format!("progress of job {}", job.id), &e),
                }
            }
            if now >= next_heartbeat {
                match self.heartbeat(&job) {
                    Ok(true) => {
                        lease_until = now + job.lease;
                        next_heartbeat = now + interval;
                    }
                    Ok(false) => {
                        kill_group(&mut child);
                        return self.log(&format!(
                            "lease lost on job {} (lease token {}): heartbeat refused, command killed",
                            job.id, job.token
                        ));
                    }
                    Err(e) => {
                        self.failed(&format!("heartbeat of job {}", job.id), &e);
                        next_heartbeat = now + interval / 3;
                    }
                }
            }
            if Instant::now() >= lease_until {
                kill_group(&mut child);
                return self.log(&format!(
                    "lease lost on job {}: no heartbeat got through for a whole lease, command killed; \
                     the job is left to lease expiry",
                    job.id
                ));
            }
            thread::sleep(Duration::from_millis(20));
        };
        // A process the command left behind may hold stderr open: do not wait for it long.
        let until = Instant::now() + Duration::from_secs(1);
        while !(reader.is_finished() && stdout_reader.is_finished()) && Instant::now() < until {
            thread::sleep(Duration::from_millis(10));
        }
        let tail = tail.lock().unwrap().clone();
        let output = std::mem::take(&mut *output.lock().unwrap());
        if let Some(progress) = &output.progress {
            // A last report the loop did not pass on: the job's next attempt would resume from it.
            if let Err(e) = self.progress(&job, progress) {
                self.failed(&format!("progress of job {}", job.id), &e);
            }
        }
        if output.cut {
            self.log(&format!(
                "job {}: the result is the first {} bytes of its stdout",
                job.id, self.shared.opts.result_bytes
            ));
        }
        let snooze = output.snooze.unwrap_or(self.shared.opts.snooze);
        self.report(&job, outcome(status, &tail, output.result(), snooze), lease_until);
    }

    /// The job's last progress report, for a retried attempt (JQ_PROGRESS). An extension without
    /// jq_progress_of (before 0.3.0), or a failed read, gives none.
    fn progress_of(&mut self, job: &Job) -> Option<String> {
        let worker = self.worker.clone();
        let row = self
            .db()
            .and_then(|db| db.query_one("SELECT jq_progress_of($1, $2, $3)::text", &[&job.id, &worker, &job.token]));
        match row {
            Ok(row) => row.get(0),
            Err(e) => {
                if e.code() != Some(&SqlState::UNDEFINED_FUNCTION) {
                    self.failed(&format!("progress of job {}", job.id), &e);
                }
                None
            }
        }
    }

    fn progress(&mut self, job: &Job, progress: &str) -> Result<bool, postgres::Error> {
        let worker = self.worker.clone();
        let row = self
            .db()?
            .query_one("SELECT jq_progress($1, $2, $3, $4::text::jsonb)", &[&job.id, &worker, &job.token, &progress])?;
        Ok(row.get(0))
    }

    fn spawn(&self, job: &Job, resume: Option<&str>) -> std::io::Result<Child> {
        let command = &self.shared.opts.command;
        let mut cmd = Command::new(&command[0]);
        cmd.args(&command[1..])
            .env("JQ_JOB_ID", job.id.to_string())
            .env("JQ_QUEUE", &self.shared.opts.queue)
            .env("JQ_ATTEMPT", job.attempt.to_string())
            .env("JQ_LEASE_TOKEN", job.token.to_string())
            .env_remove("JQ_PROGRESS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group: a terminal's Ctrl-C reaches only the worker, which lets the
            // command finish, and kill_group reaches whatever the command started.
            .process_group(0);
        if let Some(progress) = resume {
            cmd.env("JQ_PROGRESS", progress);
        }
        #[cfg(target_os = "linux")]
        // SAFETY: prctl is async-signal-safe. If the worker dies (SIGKILL included), the command
        // is killed too instead of running on unsupervised while its job runs again elsewhere.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        cmd.spawn()
    }

    fn heartbeat(&mut self, job: &Job) -> Result<bool, postgres::Error> {
        let worker = self.worker.clone();
        let row = self.db()?.query_one("SELECT jq_heartbeat($1, $2, $3)", &[&job.id, &worker, &job.token])?;
        Ok(row.get(0))
    }

    /// Reports the outcome, retrying through lost connections for as long as the lease may still
    /// hold; after that the fence would refuse the report anyway.
    fn report(&mut self, job: &Job, outcome: Outcome, lease_until: Instant) {
        let worker = self.worker.clone();
        let mut backoff = Duration::from_millis(100);
        loop {
            let result = self.db().and_then(|db| match &outcome {
                Outcome::Completed(None) => {
                    db.query_one("SELECT jq_complete($1, $2, $3)", &[&job.id, &worker, &job.token])
                }
                Outcome::Completed(Some(result)) => db.query_one(
                    "SELECT jq_complete($1, $2, $3, result => $4::text::jsonb)",
                    &[&job.id, &worker, &job.token, result],
                ),
                Outcome::Snoozed(seconds) => db.query_one(
                    "SELECT jq_snooze($1, $2, $3, make_interval(secs => $4))",
                    &[&job.id, &worker, &job.token, seconds],
                ),
                Outcome::Failed { code, message, retryable } => db.query_one(
                    "SELECT jq_fail($1, $2, $3, $4, $5, $6)",
                    &[&job.id, &worker, &job.token, code, message, retryable],
                ),
                Outcome::Released => db.query_one(
                    "SELECT jq_fail($1, $2, $3, 'SHUTDOWN', 'worker stopped before the job finished', \
                     retryable => true, retry_in => interval '0')",
                    &[&job.id, &worker, &job.token],
                ),
            });
            match result.map(|row| row.get::<_, bool>(0)) {
                Ok(true) => {
                    let (id, token) = (job.id, job.token);
                    return self.log(&match &outcome {
                        Outcome::Completed(_) => format!("completed job {id} (lease token {token})"),
                        Outcome::Snoozed(seconds) => format!("snoozed job {id} (lease token {token}) for {seconds} s"),
                        Outcome::Failed { code, retryable: true, .. } => {
                            format!("failed job {id} (lease token {token}): {code}, retryable")
                        }
                        Outcome::Failed { code, .. } => {
                            format!("failed job {id} (lease token {token}): {code}, permanent")
                        }
                        Outcome::Released => {
                            format!("released job {id} (lease token {token}): grace ran out, command killed")
                        }
                    });
                }
                Ok(false) => {
                    return self.log(&format!(
                        "lease lost on job {} (lease token {}): the report was refused",
                        job.id, job.token
                    ))
                }
                // The server refused the result (over pg_jobqueue.max_result_bytes): complete without.
                Err(e)
                    if matches!(outcome, Outcome::Completed(Some(_)))
                        && e.code() == Some(&SqlState::INVALID_PARAMETER_VALUE) =>
                {
                    self.failed(&format!("result of job {}", job.id), &e);
                    return self.report(job, Outcome::Completed(None), lease_until);
                }
                Err(e) => {
                    self.failed(&format!("report of job {}", job.id), &e);
                    if Instant::now() + backoff >= lease_until {
                        return self.log(&format!("gave up reporting job {}: it is left to lease expiry", job.id));
                    }
                    thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }
}

/// The error with its causes: postgres::Error's own text is only the kind ("db error").
fn describe(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

fn job_from_row(row: &postgres::Row) -> Job {
    Job {
        id: row.get(0),
        payload: row.get(1),
        attempt: row.get(2),
        token: row.get(3),
        lease: Duration::from_secs_f64(row.get::<_, f64>(4).max(0.0)),
    }
}

/// Exit 0 completes (with `result`); 75 snoozes for `snooze` seconds; 65 fails for good; any other
/// exit status or a signal fails for a retry.
fn outcome(status: ExitStatus, stderr_tail: &[u8], result: Option<String>, snooze: f64) -> Outcome {
    let (code, retryable, fallback) = match (status.code(), status.signal()) {
        (Some(0), _) => return Outcome::Completed(result),
        (Some(EXIT_SNOOZE), _) => return Outcome::Snoozed(snooze),
        (Some(exit), _) => (format!("EXIT_{exit}"), exit != EXIT_PERMANENT, format!("exit status {exit}")),
        (None, Some(signal)) => (format!("SIGNAL_{signal}"), true, format!("killed by signal {signal}")),
        (None, None) => ("EXIT_UNKNOWN".into(), true, status.to_string()),
    };
    // Start at a character boundary, and drop NULs, which a text value cannot hold.
    let start = stderr_tail.iter().position(|b| b & 0xC0 != 0x80).unwrap_or(stderr_tail.len());
    let message = String::from_utf8_lossy(&stderr_tail[start..]).replace('\0', "").trim().to_string();
    let message = if message.is_empty() { fallback } else { message };
    Outcome::Failed { code, message, retryable }
}

/// What the command's stdout said: its last progress report not yet passed on, its snooze, and the
/// rest, the result.
#[derive(Default)]
struct Output {
    progress: Option<String>,
    snooze: Option<f64>,
    kept: Vec<u8>,
    /// Whether there was more than `--result-bytes`.
    cut: bool,
}

impl Output {
    /// The result as a JSON text: the output, if it is JSON; otherwise the output as a JSON
    /// string; none if it was empty.
    fn result(&self) -> Option<String> {
        let text = String::from_utf8_lossy(&self.kept).replace('\0', "");
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        match serde_json::from_str::<serde_json::Value>(text) {
            Ok(_) => Some(text.to_string()),
            Err(_) => Some(serde_json::Value::String(text.to_string()).to_string()),
        }
    }
}

/// Reads the command's stdout: progress lines (`JQ-PROGRESS {...}`, passed on as they come, the
/// latest winning), a snooze line (`JQ-SNOOZE 30`), and the rest, of which the first `keep` bytes
/// become the result.
fn read_stdout(stdout: ChildStdout, keep: usize, output: &Mutex<Output>) {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
        let text = String::from_utf8_lossy(&line);
        let mut output = output.lock().unwrap();
        if let Some(report) = text.strip_prefix(PROGRESS_LINE) {
            if serde_json::from_str::<serde_json::Value>(report.trim()).is_ok() {
                output.progress = Some(report.trim().to_string());
            }
        } else if let Some(seconds) = text.strip_prefix(SNOOZE_LINE) {
            output.snooze = seconds.trim().parse().ok().filter(|s: &f64| s.is_finite() && *s >= 0.0);
        } else if output.kept.len() + line.len() <= keep {
            output.kept.extend_from_slice(&line);
        } else {
            let room = keep - output.kept.len();
            // Cut at a character boundary.
            let cut = (0..=room).rev().find(|&i| i == line.len() || line[i] & 0xC0 != 0x80).unwrap_or(0);
            output.kept.extend_from_slice(&line[..cut]);
            output.cut = true;
        }
        line.clear();
    }
}

/// Copies the command's stderr to ours line by line, each line marked with the job id, and keeps
/// its last STDERR_TAIL bytes for the error message.
fn pass_stderr(stderr: ChildStderr, prefix: &str, tail: &Mutex<Vec<u8>>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
        {
            let mut out = std::io::stderr().lock();
            let _ = out.write_all(prefix.as_bytes());
            let _ = out.write_all(&line);
            if !line.ends_with(b"\n") {
                let _ = out.write_all(b"\n");
            }
        }
        let mut tail = tail.lock().unwrap();
        tail.extend_from_slice(&line);
        let excess = tail.len().saturating_sub(STDERR_TAIL);
        tail.drain(..excess);
        line.clear();
    }
}

/// Kills the command and everything in its process group, and reaps it.
fn kill_group(child: &mut Child) {
    // SAFETY: kill has no memory effects; the group id is the child's pid (process_group(0)).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
}
