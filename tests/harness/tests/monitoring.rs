//! The alternative to jq-dashboard's /metrics (guide, "Operating"): Debian's postgres_exporter
//! scrapes a real server with monitoring/postgres_exporter.yaml, as a role that is only a member of
//! pg_monitor, and every figure of its queues comes out as a series; the alert rules of
//! monitoring/postgres_exporter_alerts.yml fire, under `promtool test rules`, on exactly the series
//! that exporter produced and that warn. (monitoring/alerts.yml, on jq-dashboard's series, is
//! tested in dashboard/tests/alerts.rs.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use jq_harness::prometheus::{self, json_map, promtool, quoted, render, samples, Rule, Sample};
use jq_harness::{free_port, http_get, wait_until, Cluster};

const EXPORTER: &str = "/usr/bin/prometheus-postgres-exporter";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
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
        samples(&body.unwrap())
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
/// The rules of monitoring/postgres_exporter_alerts.yml, each comparing one warning series with 1.
fn rules() -> Vec<(Rule, String)> {
    prometheus::rules(&repository().join("monitoring/postgres_exporter_alerts.yml"))
        .into_iter()
        .map(|rule| {
            let metric =
                rule.expr.strip_suffix(" == 1").expect("each rule compares one warning series with 1").to_owned();
            (rule, metric)
        })
        .collect()
}

/// A `promtool test rules` file (JSON, which YAML reads): the scraped samples as input series that
/// keep their value for 20 minutes, and for each rule, the alerts expected after 10 minutes: one
/// for each scraped sample of its metric that is 1, with the rule's labels and rendered annotations.
fn promtool_test(samples: &[Sample], rules: &[(Rule, String)]) -> String {
    let series: Vec<String> = samples
        .iter()
        .filter(|s| s.name.starts_with("pg_jobqueue") && s.value != "NaN")
        .map(|s| {
            format!("{{\"series\": {}, \"values\": {}}}", quoted(&s.series()), quoted(&format!("{}+0x20", s.value)))
        })
        .collect();
    let tests: Vec<String> = rules
        .iter()
        .map(|(rule, metric)| {
            let alerts: Vec<String> = samples
                .iter()
                .filter(|s| s.name == *metric && s.value == "1")
                .map(|s| {
                    let mut labels = s.labels.clone();
                    labels.extend(rule.labels.iter().cloned());
                    let annotations: BTreeMap<String, String> =
                        rule.annotations.iter().map(|(k, v)| (k.clone(), render(v, &s.labels))).collect();
                    format!(
                        "{{\"exp_labels\": {}, \"exp_annotations\": {}}}",
                        json_map(&labels),
                        json_map(&annotations)
                    )
                })
                .collect();
            format!(
                "{{\"eval_time\": \"10m\", \"alertname\": {}, \"exp_alerts\": [{}]}}",
                quoted(&rule.alert),
                alerts.join(", ")
            )
        })
        .collect();
    format!(
        "{{\"rule_files\": [{}], \"evaluation_interval\": \"1m\", \"tests\": [{{\"interval\": \"1m\", \
         \"input_series\": [{}], \"alert_rule_test\": [{}]}}]}}",
        quoted(&repository().join("monitoring/postgres_exporter_alerts.yml").display().to_string()),
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
    let (code, said) = promtool(&["test", "rules", &test_file.to_string_lossy()], None);
    assert_eq!(code, Some(0), "promtool test rules failed:\n{said}");
    let alerts: usize =
        rules.iter().map(|(_, metric)| samples.iter().filter(|s| s.name == *metric && s.value == "1").count()).sum();
    assert_eq!(alerts, 4, "each rule fires once: one queue or database in each state");
}
