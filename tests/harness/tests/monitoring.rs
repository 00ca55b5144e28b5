//! The alternative to jq-dashboard's /metrics (guide, "Operating"): Debian's postgres_exporter
//! scrapes a real server with monitoring/postgres_exporter.yaml, as a role that is only a member of
//! pg_monitor, and every figure of its queues comes out as a series; the alert rules of
//! monitoring/postgres_exporter_alerts.yml fire, under `promtool test rules`, on exactly the series
//! that exporter produced and that warn. (monitoring/alerts.yml, on jq-dashboard's series, is
//! tested in dashboard/tests/alerts.rs.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use jq_harness::{free_port, http_get, wait_until, Cluster};

const EXPORTER: &str = "/usr/bin/prometheus-postgres-exporter";
const PROMTOOL: &str = "/usr/bin/promtool";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// A sample of the text exposition format: its name, labels and value.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: String,
}

impl Sample {
    fn parse(line: &str) -> Option<Sample> {
        if line.starts_with('#') || line.trim().is_empty() {
            return None;
        }
        let (series, value) = line.rsplit_once(' ')?;
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}')?),
            None => (series, ""),
        };
        // The exporter's label values here hold no comma, quote or backslash.
        let labels = labels
            .split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap();
                (key.to_owned(), value.trim_matches('"').to_owned())
            })
            .collect();
        Some(Sample { name: name.to_owned(), labels, value: value.to_owned() })
    }

    fn series(&self) -> String {
        let labels: Vec<String> = self.labels.iter().map(|(key, value)| format!("{key}=\"{value}\"")).collect();
        format!("{}{{{}}}", self.name, labels.join(","))
    }
}

/// The value of the one sample of `name` whose labels include `labels`.
fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> String {
    let found: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.name == name && labels.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
        .collect();
    assert_eq!(found.len(), 1, "one sample of {name} {labels:?} in the scrape");
    found[0].value.clone()
}

/// postgres_exporter on a free port, killed on drop.
struct Exporter {
    child: Child,
    port: u16,
}

impl Exporter {
    fn start(cluster: &Cluster, user: &str, log: &Path) -> Exporter {
        let port = free_port();
        let child = Command::new(EXPORTER)
            .env(
                "DATA_SOURCE_NAME",
                format!("host=127.0.0.1 port={} user={user} dbname=postgres sslmode=disable", cluster.port()),
            )
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg(format!("--extend.query-path={}", repository().join("monitoring/postgres_exporter.yaml").display()))
            .args(["--disable-default-metrics", "--disable-settings-metrics"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("start prometheus-postgres-exporter");
        Exporter { child, port }
    }

    fn scrape(&self) -> Vec<Sample> {
        let mut body = None;
        wait_until("the exporter answers", || {
            body = http_get(self.port, "/metrics").and_then(|(status, body)| (status == 200).then_some(body));
            body.is_some()
        });
        body.unwrap().lines().filter_map(Sample::parse).collect()
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One rule of monitoring/postgres_exporter_alerts.yml: its name, the metric its expression compares with 1, and its
/// labels and annotations, read line by line (the file's own layout).
struct Rule {
    alert: String,
    metric: String,
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
}

fn rules() -> Vec<Rule> {
    let text = std::fs::read_to_string(repository().join("monitoring/postgres_exporter_alerts.yml")).unwrap();
    let mut rules: Vec<Rule> = Vec::new();
    let mut section = "";
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(alert) = trimmed.strip_prefix("- alert: ") {
            rules.push(Rule { alert: alert.to_owned(), metric: String::new(), labels: vec![], annotations: vec![] });
            continue;
        }
        let Some(rule) = rules.last_mut() else { continue };
        if let Some(expr) = trimmed.strip_prefix("expr: ") {
            let metric = expr.strip_suffix(" == 1").expect("each rule compares one warning series with 1");
            rule.metric = metric.to_owned();
        } else if trimmed == "labels:" || trimmed == "annotations:" {
            section = if trimmed == "labels:" { "labels" } else { "annotations" };
        } else if let Some((key, value)) = trimmed.split_once(": ") {
            if key == "for" {
                continue;
            }
            let value = value.trim_matches('"').to_owned();
            match section {
                "labels" => rule.labels.push((key.to_owned(), value)),
                "annotations" => rule.annotations.push((key.to_owned(), value)),
                _ => {}
            }
        }
    }
    rules
}

/// `template` with each `{{ $labels.NAME }}` replaced by the sample's label, as Prometheus renders
/// it; a label the sample does not have fails the test (Prometheus would print "<no value>").
fn render(template: &str, sample: &Sample) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{ $labels.") {
        out.push_str(&rest[..start]);
        let after = &rest[start + "{{ $labels.".len()..];
        let end = after.find(" }}").expect("a closed template");
        let label = &after[..end];
        out.push_str(sample.labels.get(label).unwrap_or_else(|| panic!("{} has no label {label}", sample.name)));
        rest = &after[end + " }}".len()..];
    }
    out.push_str(rest);
    out
}

fn json(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn json_map(pairs: &[(String, String)]) -> String {
    let items: Vec<String> = pairs.iter().map(|(k, v)| format!("{}: {}", json(k), json(v))).collect();
    format!("{{{}}}", items.join(", "))
}

/// A `promtool test rules` file (JSON, which YAML reads): the scraped samples as input series that
/// keep their value for 20 minutes, and for each rule, the alerts expected after 10 minutes: one
/// for each scraped sample of its metric that is 1, with the rule's labels and rendered annotations.
fn promtool_test(samples: &[Sample], rules: &[Rule]) -> String {
    let series: Vec<String> = samples
        .iter()
        .filter(|s| s.name.starts_with("pg_jobqueue") && s.value != "NaN")
        .map(|s| format!("{{\"series\": {}, \"values\": {}}}", json(&s.series()), json(&format!("{}+0x20", s.value))))
        .collect();
    let tests: Vec<String> = rules
        .iter()
        .map(|rule| {
            let alerts: Vec<String> = samples
                .iter()
                .filter(|s| s.name == rule.metric && s.value == "1")
                .map(|s| {
                    let mut labels: Vec<(String, String)> = s.labels.clone().into_iter().collect();
                    labels.extend(rule.labels.iter().cloned());
                    let annotations: Vec<(String, String)> =
                        rule.annotations.iter().map(|(k, v)| (k.clone(), render(v, s))).collect();
                    format!(
                        "{{\"exp_labels\": {}, \"exp_annotations\": {}}}",
                        json_map(&labels),
                        json_map(&annotations)
                    )
                })
                .collect();
            format!(
                "{{\"eval_time\": \"10m\", \"alertname\": {}, \"exp_alerts\": [{}]}}",
                json(&rule.alert),
                alerts.join(", ")
            )
        })
        .collect();
    format!(
        "{{\"rule_files\": [{}], \"evaluation_interval\": \"1m\", \"tests\": [{{\"interval\": \"1m\", \
         \"input_series\": [{}], \"alert_rule_test\": [{}]}}]}}",
        json(&repository().join("monitoring/postgres_exporter_alerts.yml").display().to_string()),
        series.join(", "),
        tests.join(", ")
    )
}

/// Queues in every state the alerts speak of, in a database that nothing maintains: `late` has a
/// claimable job past its threshold, `stuck` a lease about to end, `failing` a dead job, and `fine`
/// a completed job, a pending one within the default thresholds, and one held until that pending
/// job succeeds (guide, "Workflows"), which no threshold counts.
fn populate(cluster: &Cluster) {
    cluster
        .connect()
        .batch_execute(
            "CREATE SCHEMA jobqueue;
             CREATE EXTENSION pg_jobqueue SCHEMA jobqueue;
             CREATE ROLE prometheus LOGIN IN ROLE pg_monitor;
             SET search_path = jobqueue, pg_catalog;
             SELECT jq_configure('late', '{\"warn_claimable_age\": \"1 millisecond\"}');
             SELECT jq_enqueue('late', '{}');
             SELECT jq_configure('stuck', '{\"warn_expiring_leases\": 1}');
             SELECT jq_enqueue('stuck', '{}');
             SELECT id FROM jq_claim('stuck', 'w', interval '5 seconds');
             SELECT jq_configure('failing', '{\"warn_dead_age\": \"0\"}');
             SELECT jq_enqueue('failing', '{}', max_attempts => 1);
             SELECT jq_fail(id, 'w', lease_token, 'BOOM') FROM jq_claim('failing', 'w');
             SELECT jq_enqueue('fine', '{}');
             SELECT jq_complete(id, 'w', lease_token) FROM jq_claim('fine', 'w');
             SELECT jq_enqueue('fine', '{}', depends_on => ARRAY[jq_enqueue('fine', '{}')]);",
        )
        .unwrap();
}

#[test]
fn the_exporter_serves_every_figure_and_the_alert_rules_fire_on_its_series() {
    let cluster = Cluster::start_without_extension(&[
        "shared_preload_libraries = 'pg_jobqueue'",
        // Nothing maintains the database: the maintenance alert fires.
        "pg_jobqueue.reaper_enabled = off",
        "pg_jobqueue.inline_reap_max = 0",
    ]);
    populate(&cluster);
    let log = cluster.data_dir().with_extension("exporter.log");
    let exporter = Exporter::start(&cluster, "prometheus", &log);
    let mut samples = Vec::new();
    wait_until("the exporter's scrape holds the queues' series", || {
        samples = exporter.scrape();
        samples.iter().any(|s| s.name == "pg_jobqueue_queue_dead_age_warning")
    });
    let errors = std::fs::read_to_string(&log).unwrap();
    assert_eq!(value(&samples, "pg_exporter_user_queries_load_error", &[]), "0", "{errors}");
    assert_eq!(value(&samples, "pg_exporter_last_scrape_error", &[]), "0", "{errors}");
    assert!(!errors.contains("level=error"), "the exporter logged errors:\n{errors}");

    // Jobs by status, health, counters, failures by code and maintenance, as the server has them.
    let jobs = |queue, status| value(&samples, "pg_jobqueue_jobs", &[("queue", queue), ("status", status)]);
    assert_eq!(
        (jobs("late", "pending"), jobs("stuck", "running"), jobs("failing", "dead")),
        ("1".into(), "1".into(), "1".into())
    );
    assert_eq!(
        (jobs("fine", "pending"), jobs("fine", "running"), jobs("fine", "dead")),
        ("1".into(), "0".into(), "0".into())
    );
    // A held job is `held`, as jq_queue_stats counts it: neither pending nor scheduled.
    assert_eq!(
        (jobs("fine", "held"), jobs("fine", "scheduled"), jobs("late", "held")),
        ("1".into(), "0".into(), "0".into())
    );
    for (queue, check) in [("late", "claimable_age"), ("stuck", "expiring_leases"), ("failing", "dead_age")] {
        for other in ["late", "stuck", "failing", "fine"] {
            let warns = value(&samples, &format!("pg_jobqueue_queue_{check}_warning"), &[("queue", other)]);
            assert_eq!(warns, if other == queue { "1" } else { "0" }, "{check} warning of {other}");
        }
    }
    assert_eq!(value(&samples, "pg_jobqueue_queue_expiring_leases", &[("queue", "stuck")]), "1");
    assert_ne!(value(&samples, "pg_jobqueue_queue_oldest_dead_age_seconds", &[("queue", "failing")]), "0");
    let counter =
        |name: &str, queue| value(&samples, &format!("pg_jobqueue_counters_{name}_total"), &[("queue", queue)]);
    assert_eq!((counter("claims", "fine"), counter("completions", "fine")), ("1".into(), "1".into()));
    assert_eq!((counter("failures", "failing"), counter("deaths", "failing")), ("1".into(), "1".into()));
    assert_eq!(
        value(&samples, "pg_jobqueue_failures_by_code_total", &[("queue", "failing"), ("error_code", "BOOM")]),
        "1"
    );
    assert_eq!(value(&samples, "pg_jobqueue_maintenance_stale", &[("served_by", "none")]), "1");

    // The alert rules, on these very series: promtool fails on an alert missing or unexpected.
    let rules = rules();
    assert_eq!(rules.len(), 4, "the rules of monitoring/postgres_exporter_alerts.yml");
    let test_file = cluster.data_dir().with_extension("alerts_test.yml");
    std::fs::write(&test_file, promtool_test(&samples, &rules)).unwrap();
    let output = Command::new(PROMTOOL).args(["test", "rules"]).arg(&test_file).output().expect("run promtool");
    assert!(
        output.status.success(),
        "promtool test rules failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let alerts: usize =
        rules.iter().map(|r| samples.iter().filter(|s| s.name == r.metric && s.value == "1").count()).sum();
    assert_eq!(alerts, 4, "each rule fires once: one queue or database in each state");
}
