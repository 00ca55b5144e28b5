//! jq-dashboard as a process against a real server, spoken to over plain HTTP: what each role sees,
//! what its actions change, and what it refuses. (The browser layer drives the same pages in
//! Chromium; these need no browser.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use jq_harness::Cluster;

struct Dashboard {
    child: Child,
    address: String,
    first_line: String,
}

impl Dashboard {
    fn start(dsn: &str, flags: &[&str], env: &[(&str, &str)]) -> Dashboard {
        let mut command = Command::new(env!("CARGO_BIN_EXE_jq-dashboard"));
        command.args(["--listen", "127.0.0.1:0", "--dsn", dsn]).args(flags).stdout(Stdio::piped());
        command.env_remove("DATABASE_URL").env_remove("JQ_DASHBOARD_PASSWORD");
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("start jq-dashboard");
        let mut first_line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first_line).unwrap();
        let address = first_line
            .strip_prefix("jq-dashboard listening on http://")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("start-up line: {first_line:?}"))
            .to_owned();
        Dashboard { child, address, first_line: first_line.trim_end().to_owned() }
    }

    /// One request; the status, the headers (lower-case names) and the body.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.address);
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        if method == "POST" {
            request.push_str(&format!(
                "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let mut lines = head.lines();
        let status: u16 = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
        let headers = lines
            .filter_map(|line| line.split_once(": "))
            .map(|(name, value)| (name.to_ascii_lowercase(), value.to_owned()))
            .collect();
        Reply { status, headers, body: body.to_owned() }
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(n, _)| n == name).map(|(_, v)| v.as_str()).collect()
    }

    /// The CSRF cookie it sets, as `jq_csrf=TOKEN`.
    fn csrf_cookie(&self) -> String {
        self.header("set-cookie")
            .into_iter()
            .find(|c| c.starts_with("jq_csrf="))
            .map(|c| c.split(';').next().unwrap().to_owned())
            .expect("a GET without the cookie sets it")
    }

    fn flash_cookie(&self) -> Option<String> {
        self.header("set-cookie")
            .into_iter()
            .find(|c| c.starts_with("jq_flash="))
            .map(|c| c.split(';').next().unwrap().to_owned())
    }
}

fn paused(client: &mut jq_harness::Client, queue: &str) -> bool {
    client.query_one("SELECT paused FROM jq_queue_health WHERE queue_name = $1", &[&queue]).unwrap().get(0)
}

#[test]
fn pages_actions_and_refusals() {
    let cluster = Cluster::start();
    let mut owner = cluster.connect();
    owner
        .batch_execute(
            "SELECT jq_enqueue('emails', '{\"to\": \"<script>alert(1)</script>\"}') FROM generate_series(1, 3);
             SELECT jq_enqueue('payroll', '{}');
             CREATE ROLE ops LOGIN; SELECT jq_grant('ops', 'emails', 'manage');
             CREATE ROLE viewer LOGIN; SELECT jq_grant('viewer', 'emails', 'monitor');",
        )
        .unwrap();
    let claimed = owner.query_one("SELECT id, lease_token FROM jq_claim('emails', 'w1')", &[]).unwrap();
    let (dead, token): (i64, i64) = (claimed.get(0), claimed.get(1));
    owner
        .execute("SELECT jq_fail($1, 'w1', $2, 'SMTP_DOWN', 'no route', retryable => false)", &[&dead, &token])
        .unwrap();
    let ops_dsn = cluster.dsn().replace("user=postgres", "user=ops");
    let viewer_dsn = cluster.dsn().replace("user=postgres", "user=viewer");

    // As ops: the overview shows its queue only, with its counts.
    let ops = Dashboard::start(&ops_dsn, &[], &[]);
    assert!(ops.first_line.starts_with("jq-dashboard listening on http://127.0.0.1:"), "{}", ops.first_line);
    let page = ops.request("GET", "/", &[], "");
    assert_eq!(page.status, 200);
    assert!(page.body.contains("data-page=\"overview\"") && page.body.contains("http-equiv=\"refresh\""));
    assert!(page.body.contains("<tr data-queue=\"emails\">"), "{}", page.body);
    assert!(!page.body.contains("payroll"), "a queue ops holds no right on");
    assert!(page.body.contains("<td class=\"n\" data-field=\"pending\">2</td>"), "{}", page.body);
    assert!(page.body.contains("<td class=\"n\" data-field=\"dead\">1</td>"));
    assert!(page.body.contains("id=\"chart-throughput\"") && page.body.contains("id=\"chart-backlog\""));
    let cookie = page.csrf_cookie();
    let token = cookie.strip_prefix("jq_csrf=").unwrap().to_owned();
    assert!(page.header("set-cookie").iter().any(|c| c.contains("HttpOnly") && c.contains("SameSite=Strict")));

    // The job page escapes the payload and offers retry for the dead job.
    let job = ops.request("GET", &format!("/jobs/{dead}"), &[("Cookie", &cookie)], "");
    assert_eq!(job.status, 200);
    assert!(job.body.contains("&lt;script&gt;") && !job.body.contains("<script>"));
    assert!(job.body.contains("data-action=\"retry\"") && !job.body.contains("data-action=\"cancel\""));
    assert!(job.body.contains("<tr data-event=\"failed\">"));
    assert!(ops.request("GET", "/jobs/999999", &[], "").status == 404);
    assert!(ops.request("GET", "/queues/payroll", &[], "").body.contains("data-page=\"error\""));
    assert_eq!(ops.request("GET", "/queues/payroll", &[], "").status, 404);

    // The dead page lists it under its code.
    let dead_page = ops.request("GET", "/dead", &[("Cookie", &cookie)], "");
    assert!(dead_page.body.contains("data-error-code=\"SMTP_DOWN\""));
    assert!(dead_page.body.contains(&format!("<tr data-job=\"{dead}\">")));

    // A forged POST (no token, or another one) is refused and changes nothing.
    let forged = ops.request("POST", "/queues/emails/pause", &[("Cookie", &cookie)], "");
    assert_eq!(forged.status, 403);
    assert!(forged.body.contains("data-page=\"error\""));
    let forged = ops.request("POST", "/queues/emails/pause", &[], &format!("csrf={token}"));
    assert_eq!(forged.status, 403, "the token without its cookie");
    assert!(!paused(&mut owner, "emails"));

    // Pause with the token: 303 back to the queue page, which says so; then resume.
    let done = ops.request("POST", "/queues/emails/pause", &[("Cookie", &cookie)], &format!("csrf={token}"));
    assert_eq!(done.status, 303);
    assert_eq!(done.header("location"), vec!["/queues/emails"]);
    assert!(paused(&mut owner, "emails"));
    let flash = done.flash_cookie().unwrap();
    let queue_page = ops.request("GET", "/queues/emails", &[("Cookie", &format!("{cookie}; {flash}"))], "");
    assert!(
        queue_page.body.contains("<div id=\"flash\" class=\"ok\">Queue emails paused.</div>"),
        "{}",
        queue_page.body
    );
    assert!(queue_page.body.contains("<tr data-setting=\"paused\"><th>paused</th><td>true</td></tr>"));
    assert!(queue_page.body.contains("data-action=\"resume\""));
    assert!(queue_page.body.contains(&format!("<tr data-job=\"{dead}\">")), "the dead job in the list");
    ops.request("POST", "/queues/emails/resume", &[("Cookie", &cookie)], &format!("csrf={token}"));
    assert!(!paused(&mut owner, "emails"));

    // Retry the dead job: pending again.
    let retried = ops.request("POST", &format!("/jobs/{dead}/retry"), &[("Cookie", &cookie)], &format!("csrf={token}"));
    assert_eq!(retried.status, 303);
    let status: String = owner.query_one("SELECT status::text FROM jq_jobs WHERE id = $1", &[&dead]).unwrap().get(0);
    assert_eq!(status, "pending");

    // /metrics is the exposition.
    let metrics = ops.request("GET", "/metrics", &[], "");
    assert_eq!(metrics.header("content-type"), vec!["text/plain; version=0.0.4; charset=utf-8"]);
    assert!(metrics.body.contains("jq_jobs{queue=\"emails\""), "{}", metrics.body);

    // A monitor-only role sees figures, no button, and its forged action is refused by the database.
    let viewer = Dashboard::start(&viewer_dsn, &[], &[]);
    let page = viewer.request("GET", "/queues/emails", &[], "");
    assert_eq!(page.status, 200);
    assert!(!page.body.contains("data-action"), "no buttons for monitor");
    assert!(page.body.contains("<tr data-setting=\"paused\">"));
    let cookie = page.csrf_cookie();
    let token = cookie.strip_prefix("jq_csrf=").unwrap();
    let refused = viewer.request("POST", "/queues/emails/pause", &[("Cookie", &cookie)], &format!("csrf={token}"));
    assert_eq!(refused.status, 303);
    let flash = refused.flash_cookie().unwrap();
    let shown = viewer.request("GET", "/queues/emails", &[("Cookie", &format!("{cookie}; {flash}"))], "");
    assert!(shown.body.contains("<div id=\"flash\" class=\"error\" data-sqlstate=\"42501\">"), "{}", shown.body);
    assert!(!paused(&mut owner, "emails"));
    assert_eq!(viewer.request("GET", &format!("/jobs/{dead}"), &[], "").status, 404, "monitor reads no job");
    assert!(viewer.request("GET", "/", &[], "").body.contains("<tr data-queue=\"emails\">"));
    assert!(!viewer.request("GET", "/dead", &[], "").body.contains("data-action"));

    // Read-only: no buttons, every POST refused.
    let quiet = Dashboard::start(&ops_dsn, &["--read-only"], &[]);
    assert!(quiet.first_line.ends_with(" (read-only)"), "{}", quiet.first_line);
    let page = quiet.request("GET", "/queues/emails", &[], "");
    assert!(!page.body.contains("data-action") && !page.body.contains("<form method=\"post\""));
    let cookie = page.csrf_cookie();
    let token = cookie.strip_prefix("jq_csrf=").unwrap();
    assert_eq!(
        quiet.request("POST", "/queues/emails/pause", &[("Cookie", &cookie)], &format!("csrf={token}")).status,
        403
    );
    assert!(!paused(&mut owner, "emails"));

    // A password: HTTP Basic with any user name.
    let guarded = Dashboard::start(&ops_dsn, &[], &[("JQ_DASHBOARD_PASSWORD", "pw")]);
    assert!(guarded.first_line.ends_with(" (password required)"), "{}", guarded.first_line);
    let denied = guarded.request("GET", "/", &[], "");
    assert_eq!(denied.status, 401);
    assert!(denied.header("www-authenticate")[0].starts_with("Basic"));
    assert_eq!(guarded.request("GET", "/", &[("Authorization", "Basic YW55OnB3")], "").status, 200); // any:pw
    assert_eq!(guarded.request("GET", "/", &[("Authorization", "Basic YW55OnB4")], "").status, 401);
    // any:px
}

#[test]
fn refuses_a_public_address_without_a_password() {
    let output = Command::new(env!("CARGO_BIN_EXE_jq-dashboard"))
        .args(["--listen", "0.0.0.0:0", "--dsn", "host=/nonexistent"])
        .env_remove("JQ_DASHBOARD_PASSWORD")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a loopback address") && stderr.contains("password"), "{stderr}");
    let help = Command::new(env!("CARGO_BIN_EXE_jq-dashboard")).arg("--help").output().unwrap();
    assert!(help.status.success() && String::from_utf8_lossy(&help.stdout).contains("--read-only"));
}
