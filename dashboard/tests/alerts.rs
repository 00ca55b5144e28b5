//! The supported Prometheus scrape (guide, "Operating"): `jq-dashboard --metrics-all-databases`
//! serves every database of a real server that has the extension, as a role that is only a member
//! of pg_monitor, with a `database` label on every series; and every rule of monitoring/alerts.yml
//! fires, under `promtool test rules`, on the series it served, on exactly the queues and databases
//! in its state. The guide names the same alerts, with the same expressions.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use jq_harness::client::{claim, complete, connect_as};
use jq_harness::prometheus::{json_map, promtool, quoted, render, rules, samples, Rule, Sample};
use jq_harness::{wait_until, Client, Cluster};

/// The role Prometheus scrapes as: a member of pg_monitor, nothing else.
const SCRAPER: &str = "prometheus";
/// The labels Prometheus gives every series of the target.
const JOB: &str = "jobqueue";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().unwrap()
}

/// Name and labels without `database`.
fn identity_without_database(sample: &Sample) -> String {
    let mut sample = sample.clone();
    sample.labels.remove("database");
    sample.value.clear();
    sample.series()
}

// ---------------------------------------------------------------------------------------------
// jq-dashboard, scraped.

struct Dashboard {
    child: Child,
    address: String,
    log: PathBuf,
}

impl Dashboard {
    fn start(cluster: &Cluster, flags: &[&str]) -> Dashboard {
        let log = cluster.data_dir().with_extension("dashboard.log");
        let dsn = format!("host=127.0.0.1 port={} user={SCRAPER} dbname=postgres", cluster.port());
        let mut child = Command::new(env!("CARGO_BIN_EXE_jq-dashboard"))
            .args(["--listen", "127.0.0.1:0", "--dsn", &dsn, "--read-only"])
            .args(flags)
            .env_remove("DATABASE_URL")
            .env_remove("JQ_DASHBOARD_PASSWORD")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start jq-dashboard");
        let mut first_line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first_line).unwrap();
        let address = first_line
            .strip_prefix("jq-dashboard listening on http://")
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| {
                panic!("start-up line: {first_line:?}; log:\n{}", std::fs::read_to_string(&log).unwrap_or_default())
            })
            .to_owned();
        Dashboard { child, address, log }
    }

    /// GET /metrics: the status, the content type and the body.
    fn scrape(&self) -> (u16, String, String) {
        let mut stream = TcpStream::connect(&self.address).unwrap();
        write!(stream, "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.address).unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let content_type = head
            .lines()
            .filter_map(|line| line.split_once(": "))
            .find(|(name, _)| name.eq_ignore_ascii_case("content-type"))
            .map(|(_, value)| value.to_owned())
            .unwrap_or_default();
        (status, content_type, body.to_owned())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }
}

impl Drop for Dashboard {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// The server: five databases besides `postgres`.

fn connect_to(cluster: &Cluster, database: &str) -> Client {
    connect_as(cluster, database, "postgres")
}

/// `app1` (extension in schema `jobqueue`) and `app2` (in `public`) with queues in the states the
/// alerts speak of, the counters' series already there; `plain` without the extension; `closed`
/// with it, but no connection allowed to anyone but a superuser (its scrape fails); `private`
/// with it, where the scraping role may not connect (left out). Nothing maintains any database.
fn populate(cluster: &Cluster) {
    let mut admin = cluster.connect();
    admin.batch_execute(&format!("CREATE ROLE {SCRAPER} LOGIN IN ROLE pg_monitor")).unwrap();
    for database in ["app1", "app2", "plain", "closed", "private"] {
        admin.batch_execute(&format!("CREATE DATABASE {database}")).unwrap();
    }
    connect_to(cluster, "app1")
        .batch_execute(
            "CREATE SCHEMA jobqueue;
             CREATE EXTENSION pg_jobqueue SCHEMA jobqueue;
             SET search_path = jobqueue, pg_catalog;
             SELECT jq_configure('emails', '{\"warn_claimable_age\": \"1 millisecond\"}');
             SELECT jq_enqueue('emails', '{}');
             SELECT jq_configure('stuck', '{\"warn_expiring_leases\": 1}');
             SELECT jq_enqueue('stuck', '{}');
             SELECT id FROM jq_claim('stuck', 'w', interval '5 seconds');
             SELECT jq_configure('failing', '{\"warn_dead_age\": \"0\"}');
             SELECT jq_enqueue('failing', '{}');
             SELECT jq_complete(id, 'w', lease_token) FROM jq_claim('failing', 'w');",
        )
        .unwrap();
    connect_to(cluster, "app2")
        .batch_execute(
            "CREATE EXTENSION pg_jobqueue;
             SELECT jq_enqueue('emails', '{}');
             SELECT jq_enqueue('crashy', '{}');
             SELECT jq_complete(id, 'w', lease_token) FROM jq_claim('crashy', 'w');
             SELECT jq_enqueue('twice', '{}');
             SELECT jq_complete(id, 'w', lease_token) FROM jq_claim('twice', 'w');",
        )
        .unwrap();
    for database in ["closed", "private"] {
        connect_to(cluster, database).batch_execute("CREATE EXTENSION pg_jobqueue").unwrap();
    }
    admin
        .batch_execute(
            "ALTER DATABASE closed CONNECTION LIMIT 0;
             REVOKE CONNECT ON DATABASE private FROM PUBLIC;",
        )
        .unwrap();
}

/// After the first scrape: a job of app1's `failing` dies, a lease of app2's `crashy` expires and
/// is reaped, and a worker of app2's `twice` completes a job twice (the second refused).
fn transitions(cluster: &Cluster) {
    connect_to(cluster, "app1")
        .batch_execute(
            "SET search_path = jobqueue, pg_catalog;
             SELECT jq_enqueue('failing', '{}', max_attempts => 1);
             SELECT jq_fail(id, 'w', lease_token, 'BOOM') FROM jq_claim('failing', 'w');",
        )
        .unwrap();
    let mut app2 = connect_to(cluster, "app2");
    app2.batch_execute("SELECT jq_enqueue('crashy', '{}')").unwrap();
    claim(&mut app2, "crashy", "w", "100 ms").expect("a crashy job");
    wait_until("the crashy job's lease expires and is reaped", || {
        app2.query_one("SELECT jq_reap()", &[]).unwrap().get::<_, i32>(0) == 1
    });
    app2.batch_execute("SELECT jq_enqueue('twice', '{}')").unwrap();
    let (id, token) = claim(&mut app2, "twice", "w", "1 min").expect("a job to complete twice");
    assert!(complete(&mut app2, id, "w", token));
    assert!(!complete(&mut app2, id, "w", token), "a second completion is refused");
}

// ---------------------------------------------------------------------------------------------
// The alerts each rule must raise on these series, and when.

/// Where a rule of monitoring/alerts.yml must fire, on the series scraped: the metric its
/// expression reads, its `check` label (health warnings, else ""), the minute, and the (database,
/// queue) of each alert ("" where the series has no queue).
struct Expected {
    alert: &'static str,
    metric: &'static str,
    check: &'static str,
    minute: &'static str,
    fired: &'static [(&'static str, &'static str)],
}

/// Every rule's alerts. Scrape k is minute k, and the last one's values hold afterwards. A warning
/// holds from the first scrape, so that its `for` has passed by minute 8; a counter moved between
/// scrape 0 and scrape 1, so that its rate over 5 minutes is above zero at minute 2.
const EXPECTED: &[Expected] = &[
    Expected {
        alert: "JobQueueDatabaseNotScraped",
        metric: "jq_scrape_database_up",
        check: "",
        minute: "8m",
        fired: &[("closed", "")],
    },
    Expected {
        alert: "JobQueueMaintenanceStale",
        metric: "jq_maintenance_stale",
        check: "",
        minute: "8m",
        fired: &[("app1", ""), ("app2", "")],
    },
    Expected {
        alert: "JobQueueClaimableJobTooOld",
        metric: "jq_health_warning",
        check: "claimable_age",
        minute: "8m",
        fired: &[("app1", "emails")],
    },
    Expected {
        alert: "JobQueueLeasesExpiring",
        metric: "jq_health_warning",
        check: "expiring_leases",
        minute: "8m",
        fired: &[("app1", "stuck")],
    },
    Expected {
        alert: "JobQueueDeadJobs",
        metric: "jq_health_warning",
        check: "dead_age",
        minute: "8m",
        fired: &[("app1", "failing")],
    },
    Expected {
        alert: "JobQueueLeasesExpired",
        metric: "jq_lease_expirations_total",
        check: "",
        minute: "2m",
        fired: &[("app2", "crashy")],
    },
    Expected {
        alert: "JobQueueStaleCompletions",
        metric: "jq_stale_completions_total",
        check: "",
        minute: "2m",
        fired: &[("app2", "twice")],
    },
    Expected {
        alert: "JobQueueJobsDied",
        metric: "jq_deaths_total",
        check: "",
        minute: "8m",
        fired: &[("app1", "failing")],
    },
    Expected {
        alert: "JobQueueFailing",
        metric: "jq_failures_total",
        check: "",
        minute: "8m",
        fired: &[("app1", "failing")],
    },
];

/// A `promtool test rules` file (JSON, which YAML reads): the scrapes as input series, one minute
/// apart ("_" where a series is not in a scrape), the last value held for 20 minutes; and each
/// rule's expected alerts, with the labels of its series as Prometheus scraped them (`job`,
/// `instance`), the rule's labels and its annotations rendered.
fn promtool_test(scrapes: &[Vec<Sample>], rules: &[Rule], instance: &str) -> String {
    let target = |sample: &Sample| {
        let mut sample = sample.clone();
        sample.labels.insert("job".into(), JOB.into());
        sample.labels.insert("instance".into(), instance.into());
        sample
    };
    let mut series: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, scrape) in scrapes.iter().enumerate() {
        for sample in scrape.iter().filter(|s| s.value != "NaN") {
            let values = series.entry(target(sample).series()).or_default();
            values.resize(k, "_".into());
            values.push(sample.value.clone());
        }
    }
    let input: Vec<String> = series
        .iter()
        .map(|(series, values)| {
            let mut values = values.clone();
            values.resize(scrapes.len(), "_".into());
            let last = values.pop().unwrap();
            let held = if last == "_" { "_x20".to_owned() } else { format!("{last}+0x20") };
            format!(
                "{{\"series\": {}, \"values\": {}}}",
                quoted(series),
                quoted(&format!("{} {held}", values.join(" ")))
            )
        })
        .collect();
    let last = scrapes.last().unwrap();
    let tests: Vec<String> = EXPECTED
        .iter()
        .map(|Expected { alert, metric, check, minute: eval_time, fired }| {
            let rule = rules.iter().find(|r| r.alert == *alert).unwrap_or_else(|| panic!("no rule {alert}"));
            assert!(rule.expr.contains(metric), "{alert} reads {metric}: {}", rule.expr);
            let alerts: Vec<String> = fired
                .iter()
                .map(|(database, queue)| {
                    let found: Vec<&Sample> = last
                        .iter()
                        .filter(|s| {
                            s.name == *metric
                                && s.label("database") == Some(*database)
                                && s.label("queue").unwrap_or("") == *queue
                                && s.label("check").unwrap_or("") == *check
                        })
                        .collect();
                    assert_eq!(found.len(), 1, "one series of {metric} for {database} {queue} {check}");
                    let mut labels = target(found[0]).labels;
                    labels.extend(rule.labels.iter().cloned());
                    let annotations: BTreeMap<String, String> =
                        rule.annotations.iter().map(|(k, v)| (k.clone(), render(v, &labels))).collect();
                    format!(
                        "{{\"exp_labels\": {}, \"exp_annotations\": {}}}",
                        json_map(&labels),
                        json_map(&annotations)
                    )
                })
                .collect();
            format!(
                "{{\"eval_time\": {}, \"alertname\": {}, \"exp_alerts\": [{}]}}",
                quoted(eval_time),
                quoted(alert),
                alerts.join(", ")
            )
        })
        .collect();
    format!(
        "{{\"rule_files\": [{}], \"evaluation_interval\": \"1m\", \"tests\": [{{\"interval\": \"1m\", \
         \"input_series\": [{}], \"alert_rule_test\": [{}]}}]}}",
        quoted(&repository().join("monitoring/alerts.yml").display().to_string()),
        input.join(", "),
        tests.join(", ")
    )
}

#[test]
fn every_database_is_scraped_and_every_alert_fires_on_its_series() {
    let cluster = Cluster::start_without_extension(&[
        "shared_preload_libraries = 'pg_jobqueue'",
        // Nothing maintains the databases: the maintenance alert fires, and leases expire only
        // when the test reaps them.
        "pg_jobqueue.reaper_enabled = off",
        "pg_jobqueue.inline_reap_max = 0",
    ]);
    populate(&cluster);
    let dashboard = Dashboard::start(&cluster, &["--metrics-all-databases"]);

    let mut scrapes: Vec<Vec<Sample>> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    for k in 0..3 {
        if k == 1 {
            transitions(&cluster);
        }
        let (status, content_type, text) = dashboard.scrape();
        assert_eq!(status, 200, "{text}");
        assert!(content_type.starts_with("text/plain; version=0.0.4"), "served as {content_type}");
        scrapes.push(samples(&text));
        texts.push(text);
    }
    let last = scrapes.last().unwrap();

    // One exposition: each family once (a second HELP or TYPE line is a parse error, exit 1;
    // promtool's naming advice, exit 3, is not this test's concern).
    let (code, said) = promtool(&["check", "metrics"], Some(&texts[2]));
    assert!(matches!(code, Some(0) | Some(3)) && !said.contains("parsing error"), "{said}\n{}", texts[2]);

    // Every series has a database; app1 and app2 are read, closed is not, and the others
    // (no extension, no CONNECT, templates) are not there at all.
    assert!(last.iter().all(|s| s.label("database").is_some()), "a series without a database");
    let databases: BTreeSet<&str> = last.iter().filter_map(|s| s.label("database")).collect();
    assert_eq!(databases, BTreeSet::from(["app1", "app2", "closed"]));
    let up = |database: &str| {
        last.iter()
            .find(|s| s.name == "jq_scrape_database_up" && s.label("database") == Some(database))
            .map(|s| s.value.clone())
    };
    assert_eq!((up("app1"), up("app2"), up("closed")), (Some("1".into()), Some("1".into()), Some("0".into())));
    assert!(last.iter().filter(|s| s.label("database") == Some("closed")).count() == 1, "closed: up 0, nothing else");

    // Each database's series are those its own jq_metrics() gives the scraping role, and the same
    // queue name in two databases is two series.
    for database in ["app1", "app2"] {
        let mut own = connect_as(&cluster, database, SCRAPER);
        if database == "app1" {
            own.batch_execute("SET search_path = jobqueue").unwrap();
        }
        let text: String = own.query_one("SELECT jq_metrics()", &[]).unwrap().get(0);
        let expected: BTreeSet<String> = samples(&text).iter().map(identity_without_database).collect();
        let served: BTreeSet<String> = last
            .iter()
            .filter(|s| s.label("database") == Some(database) && s.name != "jq_scrape_database_up")
            .map(identity_without_database)
            .collect();
        assert_eq!(served, expected, "the series of {database}");
    }
    let pending = |database: &str| {
        last.iter()
            .find(|s| {
                s.name == "jq_jobs"
                    && s.label("database") == Some(database)
                    && s.label("queue") == Some("emails")
                    && s.label("status") == Some("pending")
            })
            .map(|s| s.value.clone())
    };
    assert_eq!((pending("app1"), pending("app2")), (Some("1".into()), Some("1".into())));

    // The failure is logged once, not at every scrape.
    let log = dashboard.log();
    assert_eq!(log.matches("database closed not read").count(), 1, "{log}");

    // No connection is held between scrapes: a database can be dropped right after one.
    let mut admin = cluster.connect();
    wait_until("the scrape's connections are closed", || {
        let open: i64 =
            admin.query_one("SELECT count(*) FROM pg_stat_activity WHERE usename = $1", &[&SCRAPER]).unwrap().get(0);
        open == 0
    });
    admin.batch_execute("DROP DATABASE plain").unwrap();

    // The rules check, and each fires where this scenario put its state, on no other series.
    let (code, said) =
        promtool(&["check", "rules", &repository().join("monitoring/alerts.yml").to_string_lossy()], None);
    assert_eq!(code, Some(0), "{said}");
    let rules = rules(&repository().join("monitoring/alerts.yml"));
    let named: BTreeSet<&str> = rules.iter().map(|r| r.alert.as_str()).collect();
    let tested: BTreeSet<&str> = EXPECTED.iter().map(|e| e.alert).collect();
    assert_eq!(named, tested, "every rule of monitoring/alerts.yml is tested here");
    let test_file = cluster.data_dir().with_extension("alerts_test.yml");
    std::fs::write(&test_file, promtool_test(&scrapes, &rules, &dashboard.address)).unwrap();
    let (code, said) = promtool(&["test", "rules", &test_file.to_string_lossy()], None);
    assert_eq!(code, Some(0), "promtool test rules failed:\n{said}");
}

/// The alerts the guide and the README name are the rules of monitoring/alerts.yml, each shown
/// with its own expression in the table of the chapter "Operating".
#[test]
fn the_guide_names_the_shipped_alerts() {
    let rules = rules(&repository().join("monitoring/alerts.yml"));
    let shipped: BTreeSet<String> = rules.iter().map(|r| r.alert.clone()).collect();
    let mut documents: Vec<PathBuf> = std::fs::read_dir(repository().join("docs/src"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    documents.push(repository().join("README.md"));
    for document in &documents {
        let text = std::fs::read_to_string(document).unwrap();
        for (at, _) in text.match_indices("JobQueue") {
            let name: String = text[at..].chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            assert!(
                shipped.contains(&name),
                "{} names {name}, which monitoring/alerts.yml does not have",
                document.display()
            );
        }
    }
    let operating = std::fs::read_to_string(repository().join("docs/src/operating.md")).unwrap();
    let mut shown: BTreeMap<String, String> = BTreeMap::new();
    for line in operating.lines().filter(|line| line.starts_with("| `JobQueue")) {
        let cells: Vec<&str> = line.split(" | ").map(|cell| cell.trim_matches(|c| c == '|' || c == ' ')).collect();
        let name = cells[0].trim_matches('`').to_owned();
        let expr = cells.iter().rev().find(|cell| cell.starts_with('`')).unwrap().trim_matches('`').to_owned();
        shown.insert(name, expr);
    }
    let expected: BTreeMap<String, String> = rules.iter().map(|r| (r.alert.clone(), r.expr.clone())).collect();
    assert_eq!(shown, expected, "the alerts of the table in docs/src/operating.md, with their expressions");
}
