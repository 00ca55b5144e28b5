//! `jq-dashboard` in a real browser: Debian's Chromium, headless, driven through chromedriver
//! (WebDriver) against a throwaway server with real queues, jobs, a schedule, a workflow and two
//! roles, one with `manage` and one with only `monitor`. Each test checks what a page shows against
//! what the database answers that role, presses the page's buttons and checks what they changed,
//! and saves screenshots in target/screenshots. The dashboard is the binary `cargo build -p
//! jq-dashboard` makes (scripts/test.sh's `browser` layer builds it first).
//!
//! The pages are read through the attributes the dashboard gives its elements for this purpose
//! (`data-page`, `data-queue`, `data-field`, `data-job`, `data-action`, ...), never through their
//! wording or layout.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use fantoccini::{ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use jq_harness::client::{claim, complete, connect_as};
use jq_harness::{free_port, wait_until, Client, Cluster};
use serde_json::{json, Value};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The role with `manage` on `emails` and `reports`, and only `monitor` on `payroll`.
const MANAGER: &str = "dash_manager";
/// The role with only `monitor`, on `emails` and `reports`.
const WATCHER: &str = "dash_watcher";
/// How many jobs a page of a queue's jobs lists.
const PAGE_SIZE: usize = 50;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => repository().join(dir),
        None => repository().join("target"),
    }
}

// ---------------------------------------------------------------------------------------------
// The database: queues and jobs in every state the pages show.

/// The jobs `fill` made, by what they are for.
struct Jobs {
    /// `emails`: dead after two attempts (worker-a, then worker-b), both `SMTP_TIMEOUT`.
    dead_twice: i64,
    /// `emails`: dead at its first attempt, `BAD_ADDRESS`.
    bad_address: i64,
    /// `emails`: dead at its first attempt, `SMTP_TIMEOUT`.
    timed_out: i64,
    /// `emails`: dead at its first attempt, `PARSE`.
    unparsable: i64,
    /// `emails`: dead at its first attempt, `PARSE`, after `unparsable`.
    unparsable_too: i64,
    /// `emails`: running, claimed by worker-r for an hour, with progress reported.
    running: i64,
    /// `emails`: pending, due in an hour.
    scheduled: i64,
    /// `emails`: pending, claimable now (one of many).
    pending: i64,
    /// `reports`: succeeded with a result.
    parent_done: i64,
    /// `reports`: pending.
    parent_pending: i64,
    /// `reports`: waits for both parents.
    child: i64,
    /// `secret`: a queue neither role has any right on.
    secret: i64,
}

/// The test's queues, roles, jobs and schedules, made as the owner.
fn fill(cluster: &Cluster) -> Jobs {
    let mut db = cluster.connect();
    db.batch_execute(&format!(
        "CREATE ROLE {MANAGER} LOGIN; CREATE ROLE {WATCHER} LOGIN;
         SELECT jq_grant('{MANAGER}', 'emails', 'manage');
         SELECT jq_grant('{MANAGER}', 'reports', 'manage');
         SELECT jq_grant('{MANAGER}', 'payroll', 'monitor');
         SELECT jq_grant('{WATCHER}', 'emails', 'monitor');
         SELECT jq_grant('{WATCHER}', 'reports', 'monitor');"
    ))
    .unwrap();
    // Each job that is claimed is the only claimable job of its queue at the time.
    let dead_twice = enqueue(&mut db, "emails", r#"{"to": "dead1@example.com"}"#, "max_attempts => 2");
    fail(&mut db, "emails", dead_twice, "worker-a", "SMTP_TIMEOUT", "retryable => true, retry_in => interval '0'");
    fail(&mut db, "emails", dead_twice, "worker-b", "SMTP_TIMEOUT", "retryable => true, retry_in => interval '0'");
    let bad_address = enqueue(&mut db, "emails", r#"{"to": "nobody"}"#, "");
    fail(&mut db, "emails", bad_address, "worker-a", "BAD_ADDRESS", "retryable => false");
    let timed_out = enqueue(&mut db, "emails", r#"{"to": "slow@example.com"}"#, "");
    fail(&mut db, "emails", timed_out, "worker-c", "SMTP_TIMEOUT", "retryable => false");
    let unparsable = enqueue(&mut db, "emails", r#"{"to": 42}"#, "");
    fail(&mut db, "emails", unparsable, "worker-c", "PARSE", "retryable => false");
    let unparsable_too = enqueue(&mut db, "emails", r#"{"to": 43}"#, "");
    fail(&mut db, "emails", unparsable_too, "worker-c", "PARSE", "retryable => false");
    let running = enqueue(&mut db, "emails", r#"{"to": "running@example.com"}"#, "");
    let (claimed, token) = claim(&mut db, "emails", "worker-r", "1 hour").unwrap();
    assert_eq!(claimed, running);
    db.execute("SELECT jq_progress($1, 'worker-r', $2, '{\"sent\": 3, \"of\": 10}')", &[&running, &token]).unwrap();
    let scheduled = enqueue(&mut db, "emails", r#"{"to": "later@example.com"}"#, "run_at => now() + interval '1 hour'");
    let pending = enqueue(&mut db, "emails", r#"{"to": "cancel-me@example.com"}"#, "");
    db.execute(
        "SELECT count(*) FROM jq_enqueue_batch('emails',
             ARRAY(SELECT jsonb_build_object('n', n) FROM generate_series(1, 60) n))",
        &[],
    )
    .unwrap();

    let parent_done = enqueue(&mut db, "reports", r#"{"report": "daily"}"#, "");
    let (claimed, token) = claim(&mut db, "reports", "worker-p", "1 hour").unwrap();
    assert_eq!(claimed, parent_done);
    db.execute("SELECT jq_complete($1, 'worker-p', $2, '{\"rows\": 42}')", &[&parent_done, &token]).unwrap();
    let parent_pending = enqueue(&mut db, "reports", r#"{"report": "weekly"}"#, "");
    let child = enqueue(
        &mut db,
        "reports",
        r#"{"report": "merge"}"#,
        &format!("depends_on => ARRAY[{parent_done}, {parent_pending}]::bigint[]"),
    );
    db.batch_execute(
        "SELECT jq_schedule('nightly-report', '0 3 * * *', 'reports', '{\"report\": \"nightly\"}',
                            time_zone => 'Europe/Paris');
         SELECT jq_schedule('payroll-run', '0 6 1 * *', 'payroll', '{}');",
    )
    .unwrap();
    enqueue(&mut db, "payroll", "{}", "");
    let secret = enqueue(&mut db, "secret", "{}", "");
    Jobs {
        dead_twice,
        bad_address,
        timed_out,
        unparsable,
        unparsable_too,
        running,
        scheduled,
        pending,
        parent_done,
        parent_pending,
        child,
        secret,
    }
}

/// jq_enqueue with the named arguments given (SQL, may be empty); the job's id.
fn enqueue(db: &mut Client, queue: &str, payload: &str, options: &str) -> i64 {
    let options = if options.is_empty() { String::new() } else { format!(", {options}") };
    db.query_one(&format!("SELECT jq_enqueue($1, $2::text::jsonb{options})"), &[&queue, &payload]).unwrap().get(0)
}

/// Claims `job` (the only claimable job of `queue`) as `worker` and fails it with `code`.
fn fail(db: &mut Client, queue: &str, job: i64, worker: &str, code: &str, options: &str) {
    let (claimed, token) = claim(db, queue, worker, "1 hour").unwrap();
    assert_eq!(claimed, job, "the job claimed is the one to fail");
    let failed: bool = db
        .query_one(
            &format!("SELECT jq_fail($1, $2, $3, $4, 'the message of ' || $4, {options})"),
            &[&job, &worker, &token, &code],
        )
        .unwrap()
        .get(0);
    assert!(failed);
}

/// A job's status as the owner sees it, or None once it is gone.
fn status_of(db: &mut Client, job: i64) -> Option<String> {
    db.query_opt("SELECT status::text FROM jq_jobs WHERE id = $1", &[&job]).unwrap().map(|row| row.get(0))
}

/// Whether a queue is paused, in its settings and in jq_queue_health, as the owner sees them.
fn paused(db: &mut Client, queue: &str) -> (bool, bool) {
    let setting: Option<bool> =
        db.query_opt("SELECT paused FROM jq_queues WHERE queue_name = $1", &[&queue]).unwrap().map(|row| row.get(0));
    let health: bool =
        db.query_one("SELECT paused FROM jq_queue_health WHERE queue_name = $1", &[&queue]).unwrap().get(0);
    (setting.unwrap_or(false), health)
}

/// Every row of `sql` as text, for comparing a whole state before and after.
fn snapshot(db: &mut Client, sql: &str) -> Vec<String> {
    db.query(&format!("SELECT t::text FROM ({sql}) t"), &[]).unwrap().iter().map(|row| row.get(0)).collect()
}

/// What a refused action must leave as it was: every job, event, setting and schedule.
fn everything(db: &mut Client) -> Vec<String> {
    let mut all = snapshot(db, "SELECT * FROM jq_jobs ORDER BY id");
    all.extend(snapshot(db, "SELECT * FROM jq_job_events ORDER BY id"));
    all.extend(snapshot(db, "SELECT * FROM jq_queues ORDER BY queue_name"));
    all.extend(snapshot(db, "SELECT * FROM jq_schedule_specs ORDER BY name"));
    all
}

// ---------------------------------------------------------------------------------------------
// The programs: jq-dashboard, chromedriver, and Chromium through it.

/// A program the test started, killed on drop. What it printed is shown when the test fails.
struct Process {
    name: String,
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Process {
    /// Starts `command` with its output collected; every line of its stdout also comes out of the
    /// receiver returned.
    fn start(name: &str, mut command: Command) -> (Process, mpsc::Receiver<String>) {
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("start {name}: {e}"));
        let output = Arc::new(Mutex::new(String::new()));
        let (lines_sender, lines) = mpsc::channel();
        collect(child.stdout.take().unwrap(), output.clone(), Some(lines_sender));
        collect(child.stderr.take().unwrap(), output.clone(), None);
        (Process { name: name.to_owned(), child, output }, lines)
    }

    fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }
}

/// Reads `stream` line by line into `output` (and `lines`) until it closes, on a thread of its own,
/// so that a program never blocks on a full pipe.
fn collect(stream: impl Read + Send + 'static, output: Arc<Mutex<String>>, lines: Option<mpsc::Sender<String>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            {
                let mut output = output.lock().unwrap();
                output.push_str(&line);
                output.push('\n');
            }
            if let Some(lines) = &lines {
                let _ = lines.send(line);
            }
        }
    });
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("---- what {} printed:\n{}", self.name, self.output());
        }
    }
}

/// A running jq-dashboard.
struct Dashboard {
    port: u16,
    /// The line it printed when it started listening.
    started: String,
    _process: Process,
}

fn dashboard_binary() -> PathBuf {
    target_dir().join("debug/jq-dashboard")
}

/// Starts jq-dashboard on a free port of 127.0.0.1, connected to `cluster` as `role`, with `options`
/// besides; returns once it says it listens.
fn start_dashboard(cluster: &Cluster, role: &str, options: &[&str]) -> Dashboard {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let (process, lines) = Process::start("jq-dashboard", dashboard_command(cluster, role, &listen, options));
    let started = wait_for_start(&process, &lines, &listen);
    Dashboard { port, started, _process: process }
}

/// The command that runs jq-dashboard on `listen`, connected to `cluster` as `role`, with `options`
/// besides and no password.
fn dashboard_command(cluster: &Cluster, role: &str, listen: &str, options: &[&str]) -> Command {
    let binary = dashboard_binary();
    assert!(
        binary.exists(),
        "{} is missing: build it with `cargo build -p jq-dashboard` (scripts/test.sh browser does)",
        binary.display()
    );
    let mut command = Command::new(&binary);
    command
        .arg("--listen")
        .arg(listen)
        .arg("--dsn")
        .arg(format!("postgres://{role}@127.0.0.1:{}/postgres", cluster.port()))
        .args(options)
        .env_remove("DATABASE_URL")
        .env_remove("JQ_DASHBOARD_PASSWORD");
    command
}

/// Waits for the line jq-dashboard prints once it listens on `listen`, and returns it.
fn wait_for_start(process: &Process, lines: &mpsc::Receiver<String>, listen: &str) -> String {
    let expected = format!("jq-dashboard listening on http://{listen}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.starts_with(&expected) => return line,
            Ok(_) => continue,
            Err(e) => panic!("jq-dashboard did not say `{expected}` ({e}); it printed:\n{}", process.output()),
        }
    }
}

/// chromedriver on a free port, ready for sessions.
struct Driver {
    port: u16,
    _process: Process,
}

fn start_driver() -> Driver {
    assert!(
        Path::new(CHROMEDRIVER).exists() && Path::new(CHROMIUM).exists(),
        "Chromium and chromedriver are missing: scripts/setup.sh test installs them"
    );
    let port = free_port();
    let mut command = Command::new(CHROMEDRIVER);
    command.arg(format!("--port={port}"));
    let (process, _lines) = Process::start("chromedriver", command);
    wait_until("chromedriver is ready for sessions", || {
        http(port, "GET", "/status", &[], None)
            .is_ok_and(|status| status.status == 200 && status.body.contains("\"ready\":true"))
    });
    Driver { port, _process: process }
}

/// One headless Chromium session on one dashboard, with a profile (and so cookies) of its own.
/// The WebDriver client is asynchronous; each call here runs it to its end on a runtime of the
/// browser's own, so that the tests stay plain sequential code between their database calls.
struct Browser {
    runtime: tokio::runtime::Runtime,
    client: Option<fantoccini::Client>,
    base: String,
}

/// The message a page shows after an action.
#[derive(Debug)]
struct Flash {
    class: String,
    sqlstate: Option<String>,
    text: String,
}

impl Browser {
    fn open(driver: &Driver, dashboard: &Dashboard) -> Browser {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mut capabilities = serde_json::Map::new();
        // As root Chromium's sandbox cannot start (--no-sandbox); no display, no GPU.
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            json!({
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"],
            }),
        );
        let client = runtime
            .block_on(async {
                let mut builder = ClientBuilder::new(HttpConnector::new());
                builder.capabilities(capabilities);
                builder.connect(&format!("http://127.0.0.1:{}", driver.port)).await
            })
            .unwrap_or_else(|e| panic!("a Chromium session through chromedriver: {e}"));
        Browser { runtime, client: Some(client), base: format!("http://127.0.0.1:{}", dashboard.port) }
    }

    fn client(&self) -> &fantoccini::Client {
        self.client.as_ref().unwrap()
    }

    fn block<T, E: std::fmt::Display>(&self, what: &str, future: impl Future<Output = Result<T, E>>) -> T {
        self.runtime.block_on(future).unwrap_or_else(|e| panic!("{what}: {e}"))
    }

    fn goto(&self, path: &str) {
        let url = format!("{}{path}", self.base);
        self.block(&format!("load {url}"), self.client().goto(&url));
    }

    fn script(&self, script: &str, args: Vec<Value>) -> Value {
        self.block(&format!("run `{script}`"), self.client().execute(script, args))
    }

    /// `script`, or None while it cannot run (a page being replaced).
    fn try_script(&self, script: &str) -> Option<Value> {
        self.runtime.block_on(self.client().execute(script, vec![])).ok()
    }

    /// The page's `data-page`.
    fn page(&self) -> String {
        self.script("return document.body ? (document.body.getAttribute('data-page') || '') : ''", vec![])
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn count(&self, css: &str) -> usize {
        self.script("return document.querySelectorAll(arguments[0]).length", vec![json!(css)]).as_u64().unwrap()
            as usize
    }

    /// The text of every element `css` matches, trimmed.
    fn texts(&self, css: &str) -> Vec<String> {
        let texts = self.script(
            "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.textContent.trim())",
            vec![json!(css)],
        );
        texts.as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect()
    }

    /// The text of the one element `css` matches.
    fn text(&self, css: &str) -> String {
        let texts = self.texts(css);
        assert_eq!(texts.len(), 1, "one element matches {css} on {}", self.location());
        texts.into_iter().next().unwrap()
    }

    /// The attribute `name` of every element `css` matches.
    fn attrs(&self, css: &str, name: &str) -> Vec<String> {
        let values = self.script(
            "return Array.from(document.querySelectorAll(arguments[0])).map(e => e.getAttribute(arguments[1]) || '')",
            vec![json!(css), json!(name)],
        );
        values.as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect()
    }

    /// The ids in the `data-job` attributes of the elements `css` matches.
    fn job_ids(&self, css: &str) -> Vec<i64> {
        self.attrs(css, "data-job").iter().map(|id| id.parse().unwrap()).collect()
    }

    fn location(&self) -> String {
        self.script("return location.href", vec![]).as_str().unwrap().to_owned()
    }

    /// Marks the document shown now, so that `wait_for_next_page` can tell when another replaced it.
    fn mark(&self) {
        self.script("window.jqShownBefore = true", vec![]);
    }

    fn wait_for_next_page(&self, what: &str) {
        wait_until(what, || {
            self.try_script("return document.readyState === 'complete' && !window.jqShownBefore")
                == Some(Value::Bool(true))
        });
    }

    /// Clicks the one element `css` matches and waits for the page it leads to.
    fn follow(&self, css: &str) {
        self.mark();
        let element = self.block(&format!("find {css} on {}", self.location()), self.client().find(Locator::Css(css)));
        self.block(&format!("click {css}"), element.click());
        self.wait_for_next_page(&format!("the page after clicking {css}"));
    }

    /// Presses the button `css` matches and returns the message of the page the action lands on.
    fn press(&self, css: &str) -> Flash {
        assert_eq!(self.count(css), 1, "one button matches {css} on {}", self.location());
        self.follow(css);
        self.flash().unwrap_or_else(|| panic!("no #flash on {} after pressing {css}", self.location()))
    }

    fn flash(&self) -> Option<Flash> {
        let flash = self.script(
            "const f = document.getElementById('flash');
             return f ? [f.className, f.getAttribute('data-sqlstate'), f.textContent.trim()] : null",
            vec![],
        );
        let flash = flash.as_array()?;
        Some(Flash {
            class: flash[0].as_str().unwrap().to_owned(),
            sqlstate: flash[1].as_str().map(str::to_owned),
            text: flash[2].as_str().unwrap().to_owned(),
        })
    }

    /// Posts a form the page does not have, with the page's own csrf token and `fields`, from the
    /// page shown, and returns the message of the page it lands on.
    fn post_form(&self, action: &str, fields: &[(&str, &str)]) -> Flash {
        let token = self.cookie("jq_csrf").expect("the dashboard set its csrf cookie");
        let mut fields: Vec<Value> = fields.iter().map(|(name, value)| json!([name, value])).collect();
        fields.push(json!(["csrf", token]));
        self.mark();
        self.script(
            "const form = document.createElement('form');
             form.method = 'post';
             form.action = arguments[0];
             for (const [name, value] of arguments[1]) {
                 const input = document.createElement('input');
                 input.type = 'hidden'; input.name = name; input.value = value;
                 form.appendChild(input);
             }
             document.body.appendChild(form);
             form.submit();",
            vec![json!(action), json!(fields)],
        );
        self.wait_for_next_page(&format!("the page after posting to {action}"));
        self.flash().unwrap_or_else(|| panic!("no #flash on {} after posting to {action}", self.location()))
    }

    /// The value of a cookie of the dashboard's, HttpOnly ones included (WebDriver reads them all).
    fn cookie(&self, name: &str) -> Option<String> {
        self.runtime.block_on(self.client().get_named_cookie(name)).ok().map(|c| c.value().to_owned())
    }

    /// Saves what the window shows as target/screenshots/dashboard-NAME.png.
    fn screenshot(&self, name: &str) {
        let png = self.block("take a screenshot", self.client().screenshot());
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "WebDriver's screenshot is a PNG");
        let dir = target_dir().join("screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("dashboard-{name}.png")), png).unwrap();
    }

    /// How many points the polyline `css` matches has (0 without one).
    fn points(&self, css: &str) -> usize {
        let points = self.script(
            "const line = document.querySelector(arguments[0]);
             return line ? line.getAttribute('points').trim().split(/\\s+/).length : 0",
            vec![json!(css)],
        );
        points.as_u64().unwrap() as usize
    }

    /// How many action buttons and POST forms the page has.
    fn actions(&self) -> (usize, usize) {
        (self.count("button[data-action]"), self.count("form[method=post i]"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // What the browser showed when the test failed, to read beside the assertion.
        if std::thread::panicking() {
            let page = self.try_script("return location.href + '\\n' + document.documentElement.outerHTML");
            let page = page.as_ref().and_then(Value::as_str).unwrap_or("(no page)");
            eprintln!("---- the browser's page:\n{}", page.chars().take(20_000).collect::<String>());
        }
        // Ending the session makes chromedriver stop its Chromium before chromedriver is killed.
        if let Some(client) = self.client.take() {
            let _ = self.runtime.block_on(client.close());
        }
    }
}

/// Polls `condition` every half second until it holds, for a minute at most: for a condition that
/// loads a page, which `wait_until` would load twenty times a second.
fn poll_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

// ---------------------------------------------------------------------------------------------
// Plain HTTP, for requests a page would never make.

struct Response {
    status: u16,
    head: String,
    body: String,
}

/// One HTTP request to the dashboard: `cookie` as the Cookie header, `form` as an
/// application/x-www-form-urlencoded body.
fn request(dashboard: &Dashboard, method: &str, path: &str, cookie: Option<&str>, form: Option<&str>) -> Response {
    let cookie = cookie.map(|cookie| ("Cookie", cookie));
    http(dashboard.port, method, path, cookie.as_slice(), form).unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// One HTTP/1.1 request to 127.0.0.1:`port`, on a connection of its own (chromedriver answers no
/// HTTP/1.0).
fn http(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    form: Option<&str>,
) -> std::io::Result<Response> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    let body = form.unwrap_or("");
    if form.is_some() {
        request.push_str(&format!(
            "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes())?;
    // Read up to the end of the body as the head measures it: chromedriver keeps the connection
    // open whatever the request asked.
    let mut received = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let read = stream.read(&mut buffer)?;
        received.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&received);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let mut response = Response { status: 0, head: head.to_owned(), body: String::new() };
            let complete = match (response.header("content-length"), response.header("transfer-encoding")) {
                (Some(length), _) => body.len() >= length.parse().unwrap_or(0),
                (None, Some(coding)) if coding.eq_ignore_ascii_case("chunked") => body.contains("0\r\n\r\n"),
                _ => read == 0,
            };
            if complete || read == 0 {
                response.status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
                response.body = match response.header("transfer-encoding") {
                    Some(coding) if coding.eq_ignore_ascii_case("chunked") => dechunk(body),
                    _ => body.to_owned(),
                };
                return Ok(response);
            }
        } else if read == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "no complete answer"));
        }
    }
}

/// A chunked body's content.
fn dechunk(mut chunked: &str) -> String {
    let mut body = String::new();
    while let Some((size, rest)) = chunked.split_once("\r\n") {
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap_or(0);
        if size == 0 || rest.len() < size {
            break;
        }
        body.push_str(&rest[..size]);
        chunked = rest[size..].strip_prefix("\r\n").unwrap_or(&rest[size..]);
    }
    body
}

impl Response {
    /// The value of the cookie `name` the response sets.
    fn set_cookie(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (header, value) = line.split_once(':')?;
            if !header.eq_ignore_ascii_case("set-cookie") {
                return None;
            }
            let (cookie, value) = value.trim().split(';').next()?.split_once('=')?;
            (cookie == name).then(|| value.to_owned())
        })
    }

    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (header, value) = line.split_once(':')?;
            header.eq_ignore_ascii_case(name).then(|| value.trim().to_owned())
        })
    }
}

/// Asserts that a forged POST was answered 403 with the error page.
fn assert_forbidden(response: &Response, what: &str) {
    assert_eq!(response.status, 403, "{what}: answered {}", response.head);
    assert!(response.body.contains("data-page=\"error\""), "{what}: the 403 is the error page");
}

// ---------------------------------------------------------------------------------------------
// What the pages show, against the database.

/// What the overview shows: each queue's cells by `data-field`, and how many lines its throughput
/// chart draws.
struct Overview {
    queues: BTreeMap<String, BTreeMap<String, String>>,
    throughput_lines: usize,
}

/// Loads the overview and checks its table against jq_queue_stats as the dashboard's role sees it:
/// the same queues, and each count the same. The page is read in one script, before its own
/// refresh can replace it.
fn check_overview(browser: &Browser, db: &mut Client) -> Overview {
    browser.goto("/");
    let page = browser.script(
        "const queues = {};
         for (const row of document.querySelectorAll('#queues tr[data-queue]')) {
             const cells = {};
             for (const cell of row.querySelectorAll('td[data-field]')) {
                 cells[cell.getAttribute('data-field')] = cell.textContent.trim();
             }
             cells['(links)'] = Array.from(row.querySelectorAll('a')).map(a => a.getAttribute('href')).join(' ');
             queues[row.getAttribute('data-queue')] = cells;
         }
         return {
             page: document.body.getAttribute('data-page'),
             refresh: Array.from(document.querySelectorAll('meta[http-equiv=refresh i]')).map(m => m.content),
             rows: document.querySelectorAll('#queues tr[data-queue]').length,
             queues: queues,
             charts: ['throughput', 'backlog'].map(chart => document.querySelectorAll('svg#chart-' + chart).length),
             throughputLines: document.querySelectorAll('svg#chart-throughput polyline').length,
         }",
        vec![],
    );
    assert_eq!(page["page"], "overview");
    assert_eq!(page["refresh"], json!(["5"]), "the overview refreshes itself");
    assert_eq!(page["charts"], json!([1, 1]), "the throughput and backlog charts");
    let queues: BTreeMap<String, BTreeMap<String, String>> = serde_json::from_value(page["queues"].clone()).unwrap();
    assert_eq!(page["rows"].as_u64().unwrap() as usize, queues.len(), "one row per queue");

    let stats = db
        .query(
            "SELECT queue_name, pending, scheduled, running, dead, held_by_pause, held_by_dependency
             FROM jq_queue_stats ORDER BY queue_name",
            &[],
        )
        .unwrap();
    let expected: BTreeSet<String> = stats.iter().map(|row| row.get(0)).collect();
    assert_eq!(queues.keys().cloned().collect::<BTreeSet<_>>(), expected, "the queues the role may see");
    for row in &stats {
        let queue: String = row.get(0);
        let cells = &queues[&queue];
        let cell = |field: &str| -> &str {
            cells.get(field).unwrap_or_else(|| panic!("{queue}'s row has no {field} cell: {cells:?}"))
        };
        for (i, field) in
            ["pending", "scheduled", "running", "dead", "held_by_pause", "held_by_dependency"].into_iter().enumerate()
        {
            let count: i64 = row.get(i + 1);
            assert_eq!(cell(field), count.to_string(), "{queue}'s {field} as jq_queue_stats counts it");
        }
        for field in ["held_by_limits", "held_by_rate"] {
            let shown = cell(field);
            assert!(shown.parse::<u64>().is_ok(), "{queue}'s {field} is a plain count, not {shown:?}");
        }
        // A figure of the counters is a plain count once the dashboard has sampled them, and a dash
        // before.
        let shown = cell("succeeded_recent");
        assert!(shown.parse::<u64>().is_ok() || shown == "\u{2013}", "{queue}'s succeeded_recent: {shown:?}");
        for field in
            ["claims_per_s", "completions_per_s", "claim_p50_ms", "claim_p99_ms", "oldest_claimable_age", "flags"]
        {
            cell(field);
        }
        let link = format!("/queues/{queue}");
        assert!(cell("(links)").split(' ').any(|href| href == link), "{queue}'s row links to its page");
    }
    Overview { queues, throughput_lines: page["throughputLines"].as_u64().unwrap() as usize }
}

/// The ids of a queue's jobs with `condition`, as the manager reads them.
fn managed_ids(db: &mut Client, queue: &str, condition: &str) -> BTreeSet<i64> {
    db.query(&format!("SELECT id FROM jq_managed_jobs WHERE queue_name = $1 AND {condition}"), &[&queue])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The tests.

#[test]
fn every_page_loads_and_is_saved_as_a_screenshot() {
    // Preloaded, so that the counters behind the rates and the throughput chart count.
    let cluster = Cluster::start_with(&["shared_preload_libraries = 'pg_jobqueue'"]);
    let jobs = fill(&cluster);
    let mut db = connect_as(&cluster, "postgres", MANAGER);
    let completions = |db: &mut Client| -> i64 {
        db.query_one("SELECT completions FROM jq_queue_counters() WHERE queue_name = 'emails'", &[]).unwrap().get(0)
    };
    let completed_before = completions(&mut db);
    let dashboard = start_dashboard(&cluster, MANAGER, &[]);
    assert_eq!(dashboard.started, format!("jq-dashboard listening on http://127.0.0.1:{}", dashboard.port));
    let driver = start_driver();
    let browser = Browser::open(&driver, &dashboard);

    // Work for the charts: three rounds of claims and completions, each followed by a sample of the
    // dashboard's own, so that the overview's lines have points.
    let mut worker = cluster.connect();
    for round in 1..=3 {
        let claimed = worker
            .query("SELECT id, lease_token FROM jq_claim('emails', 'worker-x', interval '1 minute', 15)", &[])
            .unwrap();
        assert_eq!(claimed.len(), 15);
        for row in &claimed {
            assert!(complete(&mut worker, row.get(0), "worker-x", row.get(1)));
        }
        poll_until(&format!("the backlog chart has {} samples", round + 1), || {
            browser.goto("/");
            browser.points("svg#chart-backlog polyline") > round
        });
    }
    let overview = check_overview(&browser, &mut db);
    assert_eq!(overview.throughput_lines, 2, "claims and completions are drawn");
    let emails = &overview.queues["emails"];
    assert_eq!(emails["succeeded_recent"], (completions(&mut db) - completed_before).to_string(), "counted");
    let claims = &emails["claims_per_s"];
    assert!(claims.parse::<f64>().is_ok_and(|rate| rate > 0.0), "claims/s: {claims}");

    let pages = [
        ("overview", "/".to_owned()),
        ("queue", "/queues/emails".to_owned()),
        ("job", format!("/jobs/{}", jobs.dead_twice)),
        ("dead", "/dead".to_owned()),
        ("schedules", "/schedules".to_owned()),
    ];
    for (page, path) in &pages {
        browser.goto(path);
        assert_eq!(&browser.page(), page, "{path} is the {page} page");
        for link in ["/", "/dead", "/schedules"] {
            assert!(browser.count(&format!("nav a[href=\"{link}\"]")) >= 1, "{path}'s nav links to {link}");
        }
        // The manager's actions, each a POST form with its csrf token.
        let (buttons, forms) = browser.actions();
        assert_eq!(
            forms,
            browser.count("form[method=post i] input[type=hidden][name=csrf]"),
            "{path}: every form's token"
        );
        if *page != "overview" {
            assert!(buttons > 0 && forms > 0, "{path} has the manager's buttons");
        }
        browser.screenshot(page);
    }

    // The Prometheus text: the same series as jq_metrics() gives the role (values move with the
    // clock, the series do not).
    let metrics: String = db.query_one("SELECT jq_metrics()", &[]).unwrap().get(0);
    let series = |text: &str| -> BTreeSet<String> {
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(
                |line| {
                    if line.starts_with('#') {
                        line.to_owned()
                    } else {
                        line.rsplit_once(' ').unwrap().0.to_owned()
                    }
                },
            )
            .collect()
    };
    browser.goto("/metrics");
    let shown = browser.script("return document.body.textContent", vec![]).as_str().unwrap().to_owned();
    assert_eq!(series(&shown), series(&metrics), "/metrics is jq_metrics()");
    assert!(shown.contains("queue=\"emails\""), "/metrics has the queues' series");
    browser.screenshot("metrics");
    let scrape = request(&dashboard, "GET", "/metrics", None, None);
    assert_eq!(scrape.status, 200);
    // Prometheus's text format, version 0.0.4 (a charset may follow).
    let content_type = scrape.header("content-type").unwrap_or_default();
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "/metrics is served as {content_type}");

    // What the role may not see does not exist for it.
    for path in ["/queues/secret".to_owned(), format!("/jobs/{}", jobs.secret), "/queues/nonesuch".to_owned()] {
        browser.goto(&path);
        assert_eq!(browser.page(), "error", "{path} is not the manager's to see");
        assert_eq!(request(&dashboard, "GET", &path, None, None).status, 404, "{path} answers 404");
    }
}

#[test]
fn the_overview_counts_what_jq_queue_stats_counts_for_each_role() {
    let cluster = Cluster::start();
    fill(&cluster);
    let manager = start_dashboard(&cluster, MANAGER, &[]);
    let watcher = start_dashboard(&cluster, WATCHER, &[]);
    let driver = start_driver();
    let as_manager = Browser::open(&driver, &manager);
    let as_watcher = Browser::open(&driver, &watcher);

    let mut manager_db = connect_as(&cluster, "postgres", MANAGER);
    let overview = check_overview(&as_manager, &mut manager_db);
    let shown: Vec<&str> = overview.queues.keys().map(String::as_str).collect();
    assert_eq!(shown, ["emails", "payroll", "reports"], "monitor on payroll shows it; no right on secret, no row");
    assert_eq!(overview.queues["reports"]["held_by_dependency"], "1", "the workflow's child waits for its parent");
    assert_eq!(overview.queues["emails"]["dead"], "5");
    let mut watcher_db = connect_as(&cluster, "postgres", WATCHER);
    let overview = check_overview(&as_watcher, &mut watcher_db);
    let shown: Vec<&str> = overview.queues.keys().map(String::as_str).collect();
    assert_eq!(shown, ["emails", "reports"], "the watcher has no right on payroll");
}

#[test]
fn the_queue_page_lists_its_jobs_by_page_and_filter() {
    let cluster = Cluster::start();
    let jobs = fill(&cluster);
    let dashboard = start_dashboard(&cluster, MANAGER, &[]);
    let driver = start_driver();
    let browser = Browser::open(&driver, &dashboard);
    let mut db = connect_as(&cluster, "postgres", MANAGER);

    browser.goto("/queues/emails");
    assert_eq!(browser.page(), "queue");
    assert!(browser.text("h1").contains("emails"), "the heading names the queue");
    assert_eq!(browser.text("#settings tr[data-setting=\"paused\"] td"), "false");
    assert_eq!(browser.count("table#held-keys"), 1, "the keys held back");

    // Every job of the queue, once, over two pages.
    let all = managed_ids(&mut db, "emails", "true");
    assert_eq!(all.len(), 68);
    let first = browser.job_ids("#jobs tr[data-job]");
    assert_eq!(first.len(), PAGE_SIZE, "a full first page");
    assert_eq!(browser.count("a[rel=prev]"), 0, "no page before the first");
    browser.follow("a[rel=next]");
    assert!(browser.location().contains("page="), "the next page is a page= link");
    let second = browser.job_ids("#jobs tr[data-job]");
    assert_eq!(second.len(), all.len() - PAGE_SIZE, "the rest on the second page");
    assert_eq!(browser.count("a[rel=next]"), 0, "no page after the last");
    assert_eq!(browser.count("a[rel=prev]"), 1, "a link back");
    let shown: Vec<i64> = first.iter().chain(&second).copied().collect();
    assert_eq!(shown.iter().copied().collect::<BTreeSet<_>>(), all, "every job of the queue is listed");
    assert_eq!(shown.len(), all.len(), "no job on two pages");
    browser.follow("a[rel=prev]");
    assert_eq!(browser.job_ids("#jobs tr[data-job]"), first, "back to the first page");

    // Each row's status is the job's.
    let statuses: BTreeMap<i64, String> = db
        .query("SELECT id, status::text FROM jq_managed_jobs WHERE queue_name = 'emails'", &[])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    for id in &first {
        let shown = browser.text(&format!("#jobs tr[data-job=\"{id}\"] td[data-field=\"status\"]"));
        assert_eq!(shown, statuses[id], "job {id}'s status");
    }

    // The filter form: status=dead lists the dead jobs and only them.
    let form = browser.block("find #filters", browser.client().form(Locator::Css("form#filters")));
    browser.block("set status", form.set_by_name("status", "dead"));
    browser.mark();
    browser.block("submit #filters", form.submit_direct());
    browser.wait_for_next_page("the filtered page");
    assert!(browser.location().contains("status=dead"), "the filter is in the address");
    let dead = managed_ids(&mut db, "emails", "status = 'dead'");
    assert_eq!(dead, [jobs.dead_twice, jobs.bad_address, jobs.timed_out, jobs.unparsable, jobs.unparsable_too].into());
    assert_eq!(browser.job_ids("#jobs tr[data-job]").into_iter().collect::<BTreeSet<_>>(), dead);
    assert!(browser.texts("#jobs tr[data-job] td[data-field=\"status\"]").iter().all(|s| s == "dead"));
    assert_eq!(browser.count("a[rel=next]"), 0, "one page of dead jobs");

    // By error code, and by age.
    browser.goto("/queues/emails?status=dead&error_code=SMTP_TIMEOUT");
    let timed_out: BTreeSet<i64> = browser.job_ids("#jobs tr[data-job]").into_iter().collect();
    assert_eq!(timed_out, managed_ids(&mut db, "emails", "last_error_code = 'SMTP_TIMEOUT'"));
    assert_eq!(timed_out, [jobs.dead_twice, jobs.timed_out].into());
    browser.goto("/queues/emails?status=running");
    assert_eq!(browser.job_ids("#jobs tr[data-job]"), [jobs.running]);
    browser.goto("/queues/emails?older_than=1%20hour");
    assert_eq!(browser.count("#jobs tr[data-job]"), 0, "every job is younger than an hour");

    // Succeeded jobs, from the history, when that status is chosen.
    browser.goto("/queues/reports?status=succeeded");
    let succeeded = managed_ids(&mut db, "reports", "status = 'succeeded'");
    assert_eq!(succeeded, [jobs.parent_done].into());
    assert_eq!(browser.job_ids("#jobs tr[data-job]").into_iter().collect::<BTreeSet<_>>(), succeeded);
    assert!(browser.texts("#jobs tr[data-job] td[data-field=\"status\"]").iter().all(|s| s == "succeeded"));
    assert_eq!(browser.count("#list-message"), 0, "no message: the list is the answer");
}

#[test]
fn the_job_page_shows_payload_attempts_events_and_dependencies() {
    let cluster = Cluster::start();
    let jobs = fill(&cluster);
    let dashboard = start_dashboard(&cluster, MANAGER, &[]);
    let driver = start_driver();
    let browser = Browser::open(&driver, &dashboard);
    let mut db = connect_as(&cluster, "postgres", MANAGER);
    let field = |name: &str| browser.text(&format!("#job dd[data-field=\"{name}\"]"));

    // A job dead after two attempts: its payload, attempts and both failures.
    browser.goto(&format!("/jobs/{}", jobs.dead_twice));
    assert_eq!(browser.page(), "job");
    assert_eq!(field("status"), "dead");
    assert_eq!(field("queue"), "emails");
    assert_eq!(field("attempts"), "2");
    assert_eq!(field("max_attempts"), "2");
    assert_eq!(field("last_error_code"), "SMTP_TIMEOUT");
    assert!(field("payload").contains("dead1@example.com"), "the payload: {}", field("payload"));
    let events = db
        .query(
            "SELECT event, worker, lease_token, error_code, error_message FROM jq_managed_job_events
             WHERE job_id = $1 ORDER BY id",
            &[&jobs.dead_twice],
        )
        .unwrap();
    let mut expected: Vec<(String, String, String, String)> = events
        .iter()
        .map(|row| {
            let token: i64 = row.get(2);
            (row.get(0), row.get(1), token.to_string(), row.get(3))
        })
        .collect();
    assert_eq!(expected.len(), 2, "two failures");
    let rows = browser.attrs("#events tr[data-event]", "data-event");
    let cells = |name: &str| browser.texts(&format!("#events tr[data-event] td[data-field=\"{name}\"]"));
    let (workers, tokens, codes, messages) =
        (cells("worker"), cells("token"), cells("error_code"), cells("error_message"));
    let mut shown: Vec<(String, String, String, String)> =
        (0..rows.len()).map(|i| (rows[i].clone(), workers[i].clone(), tokens[i].clone(), codes[i].clone())).collect();
    expected.sort();
    shown.sort();
    assert_eq!(shown, expected, "each attempt's event with its worker and token");
    assert_eq!(browser.count("#events tr[data-event] td[data-field=\"at\"]"), 2);
    assert!(messages.iter().all(|m| m == "the message of SMTP_TIMEOUT"), "the error messages: {messages:?}");
    assert_eq!(browser.count("button[data-action=\"retry\"]"), 1, "a dead job can be retried");

    // A running job: its lease and progress.
    browser.goto(&format!("/jobs/{}", jobs.running));
    let token: i64 =
        db.query_one("SELECT lease_token FROM jq_managed_jobs WHERE id = $1", &[&jobs.running]).unwrap().get(0);
    assert_eq!(field("status"), "running");
    assert_eq!(field("lease_owner"), "worker-r");
    assert_eq!(field("lease_token"), token.to_string());
    assert!(!field("lease_expires_at").is_empty(), "the lease's end");
    assert!(field("progress").contains("sent"), "the progress reported: {}", field("progress"));
    assert_eq!(browser.count("button[data-action=\"cancel\"]"), 1, "a running job can be cancelled");

    // A workflow's job: what it waits for, and the parent's result.
    browser.goto(&format!("/jobs/{}", jobs.child));
    let depends: Vec<i64> = db
        .query_one("SELECT depends_on FROM jq_managed_jobs WHERE id = $1", &[&jobs.child])
        .unwrap()
        .get::<_, Vec<i64>>(0);
    assert_eq!(depends, [jobs.parent_done, jobs.parent_pending]);
    for parent in &depends {
        assert!(field("depends_on").contains(&parent.to_string()), "depends_on names {parent}");
    }
    assert_eq!(field("awaiting"), "1", "one parent has not succeeded yet");
    assert_eq!(
        browser.job_ids("#dependencies tr[data-job]").into_iter().collect::<BTreeSet<_>>(),
        depends.iter().copied().collect::<BTreeSet<_>>(),
        "a row per job it depends on"
    );
    browser.goto(&format!("/jobs/{}", jobs.parent_done));
    assert_eq!(field("status"), "succeeded");
    assert!(field("result").contains("42"), "the parent's result: {}", field("result"));
    browser.goto(&format!("/jobs/{}", jobs.scheduled));
    assert_eq!(field("status"), "pending");
}

#[test]
fn dead_jobs_retried_and_purged_from_the_dead_page() {
    let cluster = Cluster::start();
    let jobs = fill(&cluster);
    let dashboard = start_dashboard(&cluster, MANAGER, &[]);
    let driver = start_driver();
    let browser = Browser::open(&driver, &dashboard);
    let mut db = connect_as(&cluster, "postgres", MANAGER);
    let mut owner = cluster.connect();

    browser.goto("/dead");
    assert_eq!(browser.page(), "dead");
    let groups = db
        .query(
            "SELECT coalesce(last_error_code, 'none'), array_agg(id ORDER BY id) FROM jq_managed_jobs
             WHERE status = 'dead' GROUP BY 1 ORDER BY 1",
            &[],
        )
        .unwrap();
    let shown: BTreeSet<String> = browser.attrs("section[data-error-code]", "data-error-code").into_iter().collect();
    assert_eq!(shown, groups.iter().map(|row| row.get::<_, String>(0)).collect(), "a section per error code");
    for row in &groups {
        let code: String = row.get(0);
        let ids: Vec<i64> = row.get(1);
        let listed = browser.job_ids(&format!("section[data-error-code=\"{code}\"] tr[data-job]"));
        assert_eq!(listed.into_iter().collect::<BTreeSet<_>>(), ids.into_iter().collect(), "{code}'s dead jobs");
    }

    // One job retried becomes pending.
    let flash = browser.press(&format!(
        "section[data-error-code=\"BAD_ADDRESS\"] tr[data-job=\"{}\"] button[data-action=\"retry\"]",
        jobs.bad_address
    ));
    assert_eq!(flash.class, "ok", "{flash:?}");
    assert_eq!(status_of(&mut owner, jobs.bad_address).as_deref(), Some("pending"));
    browser.goto("/dead");
    assert_eq!(browser.count(&format!("tr[data-job=\"{}\"]", jobs.bad_address)), 0, "no longer dead");

    // A job behind its group's longest-dead one (dead_twice died first) is purged alone, with its
    // events; the longest-dead one stays.
    let events_of = |db: &mut Client, job: i64| -> i64 {
        db.query_one("SELECT count(*) FROM jq_job_events WHERE job_id = $1", &[&job]).unwrap().get(0)
    };
    assert!(events_of(&mut owner, jobs.timed_out) > 0);
    let dead_rows = browser.count("section[data-error-code] tr[data-job]");
    assert_eq!(
        browser.count("section[data-error-code] tr[data-job] button[data-action=\"purge\"]"),
        dead_rows,
        "a purge button on every dead job"
    );
    let flash = browser.press(&format!(
        "section[data-error-code=\"SMTP_TIMEOUT\"] tr[data-job=\"{}\"] button[data-action=\"purge\"]",
        jobs.timed_out
    ));
    assert_eq!(flash.class, "ok", "{flash:?}");
    assert_eq!(status_of(&mut owner, jobs.timed_out), None, "purged");
    assert_eq!(events_of(&mut owner, jobs.timed_out), 0, "with its events");
    assert_eq!(status_of(&mut owner, jobs.dead_twice).as_deref(), Some("dead"), "the longest-dead job stays");
    browser.goto("/dead");
    assert_eq!(browser.count(&format!("tr[data-job=\"{}\"]", jobs.timed_out)), 0, "no longer listed");

    // A whole group retried.
    let flash = browser.press("section[data-error-code=\"SMTP_TIMEOUT\"] button[data-action=\"retry-all\"]");
    assert_eq!(flash.class, "ok", "{flash:?}");
    assert_eq!(status_of(&mut owner, jobs.dead_twice).as_deref(), Some("pending"));
    let attempts: i32 =
        owner.query_one("SELECT attempt_count FROM jq_jobs WHERE id = $1", &[&jobs.dead_twice]).unwrap().get(0);
    assert_eq!(attempts, 0, "a retried job starts its attempts over");

    // One job purged is gone, with its events; then the rest of its group.
    browser.goto("/dead");
    let flash = browser.press(&format!("tr[data-job=\"{}\"] button[data-action=\"purge\"]", jobs.unparsable));
    assert_eq!(flash.class, "ok", "{flash:?}");
    assert_eq!(status_of(&mut owner, jobs.unparsable), None, "purged");
    assert_eq!(events_of(&mut owner, jobs.unparsable), 0, "with its events");
    assert_eq!(status_of(&mut owner, jobs.unparsable_too).as_deref(), Some("dead"), "the other is still there");
    browser.goto("/dead");
    let flash = browser.press("section[data-error-code=\"PARSE\"] button[data-action=\"purge-all\"]");
    assert_eq!(flash.class, "ok", "{flash:?}");
    assert_eq!(status_of(&mut owner, jobs.unparsable_too), None, "the group purged");
    browser.goto("/dead");
    assert_eq!(browser.count("section[data-error-code] tr[data-job]"), 0, "nothing dead is left");
    assert_eq!(managed_ids(&mut db, "emails", "status = 'dead'").len(), 0);
}

#[test]
fn a_queue_paused_and_resumed_from_its_page() {
    let cluster = Cluster::start();
    fill(&cluster);
    let dashboard = start_dashboard(&cluster, MANAGER, &[]);
    let driver = start_driver();
    let browser = Browser::open(&driver, &dashboard);
    let mut owner = cluster.connect();

    browser.goto("/queues/emails");
    assert_eq!(paused(&mut owner, "emails"), (false, false));
    assert_eq!(browser.count("button[data-action=\"resume\"]"), 0, "a running queue has no resume button");
    let flash = browser.press("button[data-action=\"pause\"]");
    assert_eq!(flash.class, "ok", "{flash:?}");
    assert_eq!(paused(&mut owner, "emails"), (true, true), "jq_queues and jq_queue_health say paused");
    browser.goto("/queues/emails");
    assert_eq!(browser.text("#settings tr[data-setting=\"paused\"] td"), "true");
    assert_eq!(browser.count("button[data-action=\"pause\"]"), 0, "a paused queue has no pause button");
    // The overview counts what the pause holds back.
    let overview = check_overview(&browser, &mut connect_as(&cluster, "postgres", MANAGER));
    assert_ne!(overview.queues["emails"]["held_by_pause"], "0");
    assert!(overview.queues["emails"]["flags"].contains("paused"), "the overview flags the paused queue");

    // Only monitor on payroll: its page has no buttons.
    browser.goto("/queues/payroll");
    assert_eq!(browser.page(), "queue");
    assert_eq!(browser.actions(), (0, 0), "no manage right on payroll, no buttons");

    browser.goto("/queues/emails");
    let flash = browser.press("button[data-action=\"resume\"]");
    assert_eq!(flash.class, "ok", "{flash:?}");
    assert_eq!(paused(&mut owner, "emails"), (false, false), "resumed");
    browser.goto("/queues/emails");
    assert_eq!(browser.text("#settings tr[data-setting=\"paused\"] td"), "false");
}

#[test]
fn a_job_cancelled_and_a_schedule_paused_from_their_pages() {
    let cluster = Cluster::start();
    let jobs = fill(&cluster);
    let dashboard = start_dashboard(&cluster, MANAGER, &[]);
    let driver = start_driver();
    let browser = Browser::open(&driver, &dashboard);
    let mut db = connect_as(&cluster, "postgres", MANAGER);
    let mut owner = cluster.connect();

    browser.goto(&format!("/jobs/{}", jobs.pending));
    assert_eq!(browser.count("button[data-action=\"retry\"]"), 0, "a pending job cannot be retried");
    let flash = browser.press("button[data-action=\"cancel\"]");
    assert_eq!(flash.class, "ok", "{flash:?}");
    assert_eq!(status_of(&mut owner, jobs.pending).as_deref(), Some("cancelled"));
    browser.goto(&format!("/jobs/{}", jobs.pending));
    assert_eq!(browser.text("#job dd[data-field=\"status\"]"), "cancelled");

    // The schedules the manager manages, as jq_schedules shows them to it.
    browser.goto("/schedules");
    assert_eq!(browser.page(), "schedules");
    let schedules = db
        .query("SELECT name, cron, time_zone, queue_name, paused::text FROM jq_schedules ORDER BY name", &[])
        .unwrap();
    let shown: BTreeSet<String> = browser.attrs("tr[data-schedule]", "data-schedule").into_iter().collect();
    assert_eq!(shown, schedules.iter().map(|row| row.get::<_, String>(0)).collect(), "payroll's is not the manager's");
    for row in &schedules {
        let name: String = row.get(0);
        for (i, field) in ["cron", "time_zone", "queue", "paused"].into_iter().enumerate() {
            let expected: String = row.get(i + 1);
            let cell = browser.text(&format!("tr[data-schedule=\"{name}\"] td[data-field=\"{field}\"]"));
            assert_eq!(cell, expected, "{name}'s {field}");
        }
        assert!(!browser.text(&format!("tr[data-schedule=\"{name}\"] td[data-field=\"next_run\"]")).is_empty());
    }
    let schedule_paused = |db: &mut Client| -> bool {
        db.query_one("SELECT paused FROM jq_schedules WHERE name = 'nightly-report'", &[]).unwrap().get(0)
    };
    let flash = browser.press("tr[data-schedule=\"nightly-report\"] button[data-action=\"pause\"]");
    assert_eq!(flash.class, "ok", "{flash:?}");
    assert!(schedule_paused(&mut db), "the schedule is paused");
    browser.goto("/schedules");
    assert_eq!(browser.text("tr[data-schedule=\"nightly-report\"] td[data-field=\"paused\"]"), "true");
    let flash = browser.press("tr[data-schedule=\"nightly-report\"] button[data-action=\"resume\"]");
    assert_eq!(flash.class, "ok", "{flash:?}");
    assert!(!schedule_paused(&mut db), "the schedule runs again");
}

#[test]
fn a_monitor_role_sees_no_buttons_and_its_actions_are_refused() {
    let cluster = Cluster::start();
    let jobs = fill(&cluster);
    let dashboard = start_dashboard(&cluster, WATCHER, &[]);
    let driver = start_driver();
    let browser = Browser::open(&driver, &dashboard);
    let mut owner = cluster.connect();
    let before = everything(&mut owner);

    check_overview(&browser, &mut connect_as(&cluster, "postgres", WATCHER));
    for path in [
        "/".to_owned(),
        "/queues/emails".to_owned(),
        "/queues/reports".to_owned(),
        format!("/jobs/{}", jobs.dead_twice),
        format!("/jobs/{}", jobs.pending),
        "/dead".to_owned(),
        "/schedules".to_owned(),
    ] {
        browser.goto(&path);
        assert_eq!(browser.actions(), (0, 0), "{path} has no buttons and no forms to post for a monitor");
    }

    // Forged: no token at all, and a token that is not the cookie's.
    let response = request(&dashboard, "POST", "/queues/emails/pause", None, Some(""));
    assert_forbidden(&response, "a POST without a token");
    let response =
        request(&dashboard, "POST", "/queues/emails/pause", Some("jq_csrf=forged-one"), Some("csrf=forged-two"));
    assert_forbidden(&response, "a POST whose token is not the cookie's");

    // A well-formed POST, made from the monitor's own page with its own token: the database refuses
    // it, and the page says so.
    browser.goto("/queues/emails");
    let flash = browser.post_form("/queues/emails/pause", &[]);
    assert_eq!(flash.sqlstate.as_deref(), Some("42501"), "{flash:?}");
    assert_eq!(flash.class, "error", "{flash:?}");
    assert!(!flash.text.is_empty(), "the database's message is shown");
    assert_eq!(browser.actions(), (0, 0), "still no buttons");
    assert_eq!(everything(&mut owner), before, "nothing changed");
}

#[test]
fn forged_posts_are_refused_and_change_nothing() {
    let cluster = Cluster::start();
    let jobs = fill(&cluster);
    let dashboard = start_dashboard(&cluster, MANAGER, &[]);
    let mut owner = cluster.connect();
    let before = everything(&mut owner);

    // The manager's dashboard would do these with the right token; without it, none is done.
    let forged = [
        (format!("/jobs/{}/retry", jobs.dead_twice), String::new()),
        (format!("/jobs/{}/cancel", jobs.pending), String::new()),
        (format!("/jobs/{}/purge", jobs.unparsable), String::new()),
        ("/queues/emails/pause".to_owned(), String::new()),
        ("/dead/retry".to_owned(), "queue=emails&error_code=SMTP_TIMEOUT".to_owned()),
        ("/dead/purge".to_owned(), "queue=emails&error_code=PARSE".to_owned()),
        ("/schedules/nightly-report/pause".to_owned(), String::new()),
    ];
    let page = request(&dashboard, "GET", "/", None, None);
    let cookie = page.set_cookie("jq_csrf").expect("a GET without the cookie sets it");
    assert!(!cookie.is_empty());
    for (path, form) in &forged {
        let with = |extra: &str| if form.is_empty() { extra.to_owned() } else { format!("{form}&{extra}") };
        let response = request(&dashboard, "POST", path, None, Some(form));
        assert_forbidden(&response, &format!("{path} without cookie or token"));
        let response = request(&dashboard, "POST", path, Some(&format!("jq_csrf={cookie}")), Some(form));
        assert_forbidden(&response, &format!("{path} with the cookie but no token"));
        let response = request(&dashboard, "POST", path, None, Some(&with(&format!("csrf={cookie}"))));
        assert_forbidden(&response, &format!("{path} with a token but no cookie"));
        let response =
            request(&dashboard, "POST", path, Some(&format!("jq_csrf={cookie}")), Some(&with("csrf=not-the-cookie")));
        assert_forbidden(&response, &format!("{path} with a token that is not the cookie's"));
    }
    assert_eq!(everything(&mut owner), before, "no forged POST changed anything");

    // The page's own form with its token edited in the browser: the error page, and no pause.
    let driver = start_driver();
    let browser = Browser::open(&driver, &dashboard);
    browser.goto("/queues/emails");
    browser.script(
        "document.querySelector('button[data-action=\"pause\"]').form.querySelector('input[name=csrf]').value = 'edited'",
        vec![],
    );
    browser.follow("button[data-action=\"pause\"]");
    assert_eq!(browser.page(), "error", "the edited form is refused");
    assert_eq!(everything(&mut owner), before, "the edited form changed nothing");
}

#[test]
fn read_only_shows_no_buttons_and_does_nothing() {
    let cluster = Cluster::start();
    let jobs = fill(&cluster);
    let dashboard = start_dashboard(&cluster, MANAGER, &["--read-only"]);
    assert!(dashboard.started.ends_with(" (read-only)"), "it says it is read-only: {}", dashboard.started);
    let driver = start_driver();
    let browser = Browser::open(&driver, &dashboard);
    let mut owner = cluster.connect();
    let before = everything(&mut owner);

    for path in [
        "/".to_owned(),
        "/queues/emails".to_owned(),
        format!("/jobs/{}", jobs.dead_twice),
        format!("/jobs/{}", jobs.pending),
        "/dead".to_owned(),
        "/schedules".to_owned(),
    ] {
        browser.goto(&path);
        assert_ne!(browser.page(), "error", "{path} shows");
        assert_eq!(browser.actions(), (0, 0), "{path} has no buttons and no forms to post when read-only");
    }
    browser.goto("/dead");
    assert_eq!(browser.count("section[data-error-code]"), 3, "the dead jobs are listed, without their buttons");

    // Even a POST with a good token does nothing.
    let token = browser.cookie("jq_csrf").expect("the csrf cookie");
    let response = request(
        &dashboard,
        "POST",
        "/queues/emails/pause",
        Some(&format!("jq_csrf={token}")),
        Some(&format!("csrf={token}")),
    );
    assert_forbidden(&response, "a POST to a read-only dashboard");
    assert_eq!(everything(&mut owner), before, "nothing changed");
}

#[test]
fn beyond_localhost_every_page_needs_the_password() {
    let cluster = Cluster::start();
    fill(&cluster);
    let port = free_port();
    let listen = format!("0.0.0.0:{port}");

    // Without a password it does not start.
    let (mut refused, _) = Process::start("jq-dashboard", dashboard_command(&cluster, MANAGER, &listen, &[]));
    let mut status = None;
    wait_until("jq-dashboard without a password exits", || {
        status = refused.child.try_wait().unwrap();
        status.is_some()
    });
    assert_eq!(status.unwrap().code(), Some(2), "it refuses to start");
    wait_until("it says why", || refused.output().contains("password"));

    // With one, it says so, and every page asks for it.
    let mut command = dashboard_command(&cluster, MANAGER, &listen, &[]);
    command.env("JQ_DASHBOARD_PASSWORD", "s3cret");
    let (process, lines) = Process::start("jq-dashboard", command);
    let started = wait_for_start(&process, &lines, &listen);
    assert!(started.ends_with(" (password required)"), "it says a password is needed: {started}");
    // ops:s3cret and ops:wrong, in base64.
    let (right, wrong) = ("Basic b3BzOnMzY3JldA==", "Basic b3BzOndyb25n");
    for path in ["/", "/queues/emails", "/dead", "/schedules", "/metrics"] {
        let response = http(port, "GET", path, &[], None).unwrap();
        assert_eq!(response.status, 401, "{path} without the password");
        assert!(
            response.header("www-authenticate").is_some_and(|asked| asked.starts_with("Basic")),
            "{path} asks for HTTP Basic: {}",
            response.head
        );
        assert_eq!(http(port, "GET", path, &[("Authorization", wrong)], None).unwrap().status, 401, "{path}");
        assert_eq!(http(port, "GET", path, &[("Authorization", right)], None).unwrap().status, 200, "{path}");
    }
    let mut owner = cluster.connect();
    let before = everything(&mut owner);
    let response = http(port, "POST", "/queues/emails/pause", &[], Some("csrf=x")).unwrap();
    assert_eq!(response.status, 401, "an action without the password");
    assert_eq!(everything(&mut owner), before, "changed nothing");
}

// ---------------------------------------------------------------------------------------------
// Attacks from another origin.

/// A web server of the attacker's on another port of 127.0.0.1 (same site as the dashboard, but
/// another origin): it serves `pages` by path, each with the `Set-Cookie` headers given (a server
/// on any port of a host may set a cookie for the whole host), and stops with the test.
struct Attacker {
    port: u16,
}

impl Attacker {
    fn serve(pages: Vec<(&'static str, Vec<String>, String)>) -> Attacker {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let pages = Arc::new(pages);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let pages = pages.clone();
                // A thread per connection: Chromium opens connections it sends nothing on.
                std::thread::spawn(move || answer(stream, &pages));
            }
        });
        Attacker { port }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// One request of the attacker's server, answered with `pages`.
fn answer(mut stream: TcpStream, pages: &[(&'static str, Vec<String>, String)]) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    let path = first.split_whitespace().nth(1).unwrap_or("/").to_owned();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
    }
    let (status, cookies, body) = match pages.iter().find(|(p, _, _)| *p == path) {
        Some((_, cookies, body)) => ("200 OK", cookies.clone(), body.clone()),
        None => ("404 Not Found", Vec::new(), String::new()),
    };
    let mut head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for cookie in cookies {
        head.push_str(&format!("Set-Cookie: {cookie}\r\n"));
    }
    let _ = stream.write_all(format!("{head}\r\n{body}").as_bytes());
}

/// A page that posts a form to the dashboard as soon as it loads.
fn auto_post(dashboard: &Dashboard, action: &str, token: &str) -> String {
    format!(
        "<!doctype html><body><form id=f method=post action=\"http://127.0.0.1:{}{action}\">\
         <input type=hidden name=csrf value=\"{token}\"></form>\
         <script>document.getElementById('f').submit();</script></body>",
        dashboard.port
    )
}

/// Attacks on the dashboard from a page of another origin, in Chromium, each failing and changing
/// nothing (guide, "Dashboard"):
/// * a forged cookie: the attacker's server, on another port of the same host, sets `jq_csrf` to a
///   token of its own making, and its page posts the same value;
/// * a cross-port form post carrying the browser's real token (as if it had leaked): refused for
///   its origin;
/// * a framing page: the dashboard does not show inside another page's frame;
/// * payloads nested 10,000 deep and one of 15,000 objects: their job pages are a few hundred
///   kilobytes at most, and say the value was cut.
///
/// Every answer carries the headers that forbid framing, sniffing and outside content.
#[test]
fn attacks_from_another_origin_fail_and_change_nothing() {
    let cluster = Cluster::start();
    fill(&cluster);
    let dashboard = start_dashboard(&cluster, MANAGER, &[]);
    let mut owner = cluster.connect();
    let deep: i64 = owner
        .query_one("SELECT jq_enqueue('emails', (repeat('[', 10000) || repeat(']', 10000))::jsonb)", &[])
        .unwrap()
        .get(0);
    let huge: i64 = owner
        .query_one(
            "SELECT jq_enqueue('emails', (SELECT jsonb_agg(jsonb_build_object('n', n, 'to', 'someone@example.com'))
                                          FROM generate_series(1, 15000) n))",
            &[],
        )
        .unwrap()
        .get(0);
    let before = everything(&mut owner);
    let emails_paused = |owner: &mut Client| paused(owner, "emails");
    let not_paused = emails_paused(&mut owner);

    let forged_old = "ab".repeat(32);
    let forged_new = "0".repeat(96);
    let driver = start_driver();
    // A fresh profile first, as the attacker would like it: its only jq_csrf is the forged one.
    let fresh = Browser::open(&driver, &dashboard);
    let browser = Browser::open(&driver, &dashboard);
    browser.goto("/queues/emails");
    let real = browser.cookie("jq_csrf").expect("the dashboard set its csrf cookie");
    let attacker = Attacker::serve(vec![
        (
            "/forge-old",
            vec![format!("jq_csrf={forged_old}; Path=/")],
            auto_post(&dashboard, "/queues/emails/pause", &forged_old),
        ),
        (
            "/forge-new",
            vec![format!("jq_csrf={forged_new}; Path=/")],
            auto_post(&dashboard, "/queues/emails/pause", &forged_new),
        ),
        ("/leaked", Vec::new(), auto_post(&dashboard, "/queues/emails/pause", &real)),
        (
            "/frame",
            Vec::new(),
            format!(
                "<!doctype html><body><iframe src=\"http://127.0.0.1:{}/queues/emails\" width=900 height=700 \
                 onload=\"window.framed = true\"></iframe></body>",
                dashboard.port
            ),
        ),
    ]);

    // The leaked token first: a forged cookie replaces the browser's own.
    for (who, path) in [(&browser, "/leaked"), (&fresh, "/forge-old"), (&fresh, "/forge-new"), (&browser, "/forge-old")]
    {
        who.block(&format!("load {path}"), who.client().goto(&attacker.url(path)));
        wait_until(&format!("{path} posted to the dashboard"), || {
            who.try_script("return location.port + ' ' + document.readyState")
                == Some(Value::String(format!("{} complete", dashboard.port)))
        });
        assert_eq!(who.page(), "error", "{path}: the dashboard refused the post");
        assert_eq!(emails_paused(&mut owner), not_paused, "{path} paused the queue");
    }

    // Framed: the frame shows no page of the dashboard's.
    browser.block("load /frame", browser.client().goto(&attacker.url("/frame")));
    wait_until("the frame loaded", || browser.try_script("return window.framed === true") == Some(Value::Bool(true)));
    browser.block("enter the frame", browser.client().enter_frame(0));
    let inside = browser.runtime.block_on(browser.client().find(Locator::Css("body[data-page]")));
    assert!(inside.is_err(), "the dashboard showed inside another site's frame");
    browser.block("leave the frame", browser.client().enter_parent_frame());

    // The answers' headers, over plain HTTP.
    let page = request(&dashboard, "GET", "/queues/emails", None, None);
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").unwrap_or_default();
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("default-src 'none'"), "CSP: {csp}");
    assert_eq!(page.header("x-frame-options").as_deref(), Some("DENY"));
    assert_eq!(page.header("x-content-type-options").as_deref(), Some("nosniff"));
    // A forged cookie and field of the token's shape, with no Origin at all (as a script that is
    // no browser would send them): the signature alone refuses it.
    let forged = request(
        &dashboard,
        "POST",
        "/queues/emails/pause",
        Some(&format!("jq_csrf={forged_new}")),
        Some(&format!("csrf={forged_new}")),
    );
    assert_forbidden(&forged, "an unsigned token");
    // Another host name, as a page that rebinds its own name to this machine would send.
    let rebound = http(dashboard.port, "GET", "/", &[("Host", "evil.example")], None).unwrap();
    assert_eq!(rebound.status, 421, "a request naming another host: {}", rebound.head);

    // Deep and huge payloads: bounded pages, that say what they cut.
    for (id, what) in [(deep, "nested 10,000 deep"), (huge, "of 15,000 elements")] {
        let started = Instant::now();
        let response = request(&dashboard, "GET", &format!("/jobs/{id}"), None, None);
        println!("the page of a payload {what}: {} bytes in {:?}", response.body.len(), started.elapsed());
        assert_eq!(response.status, 200, "{what}");
        assert!(response.body.len() < 300 * 1024, "the page of a payload {what} is {} bytes", response.body.len());
        browser.goto(&format!("/jobs/{id}"));
        assert_eq!(browser.page(), "job", "{what}");
    }
    assert!(browser.texts("#job dd[data-field=\"payload\"] .note").iter().any(|note| note.contains("Cut")));

    assert_eq!(everything(&mut owner), before, "an attack changed something");
}
