//! jq-worker's `--metrics`: a real Prometheus (Debian's `prometheus`) scrapes the worker, and the
//! queue's counters it stores are the server's (guide, "Operating").

mod common;

use std::process::{Child, Command, Stdio};

use common::{Scratch, Worker, PRELOADED};
use jq_harness::{free_port, http_get, wait_until, Cluster};

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// A Prometheus that scrapes `target` every second, with its data in `dir`; killed on drop.
struct Prometheus {
    child: Child,
    port: u16,
}

impl Prometheus {
    fn start(dir: &std::path::Path, target: u16) -> Prometheus {
        let port = free_port();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global: {{scrape_interval: 1s, evaluation_interval: 1s}}\n\
                 scrape_configs:\n  - job_name: jq-worker\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .unwrap();
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
            .spawn()
            .expect("start prometheus");
        Prometheus { child, port }
    }

    /// The value of the one series `query` selects, or None while it selects none.
    fn value(&self, query: &str) -> Option<String> {
        let encoded: String = query
            .bytes()
            .map(|b| if b.is_ascii_alphanumeric() || b == b'_' { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect();
        let (status, body) = http_get(self.port, &format!("/api/v1/query?query={encoded}"))?;
        if status != 200 {
            return None;
        }
        let answer: serde_json::Value = serde_json::from_str(&body).ok()?;
        let result = answer["data"]["result"].as_array()?;
        assert!(result.len() <= 1, "{query} selects one series: {body}");
        Some(result.first()?["value"][1].as_str()?.to_owned())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn prometheus_scrapes_the_queues_counters_from_the_worker() {
    let cluster = Cluster::start_with(&[PRELOADED]);
    let dir = Scratch::new("metrics");
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE ROLE scraped LOGIN;
             SELECT jq_grant('scraped', 'm', 'consume');
             SELECT jq_enqueue('m', '{}') FROM generate_series(1, 3);",
        )
        .unwrap();
    let metrics = free_port();
    let address = format!("127.0.0.1:{metrics}");
    let dsn = format!("host=127.0.0.1 port={} user=scraped dbname=postgres", cluster.port());
    let _worker = Worker::start(&dsn, "m", "scraped", &["--wait", "1", "--metrics", &address], &dir, "cat >/dev/null");
    wait_until("the worker completes the three jobs", || {
        let done: i64 = client
            .query_one("SELECT count(*) FROM jq_jobs WHERE queue_name = 'm' AND status = 'succeeded'", &[])
            .unwrap()
            .get(0);
        done == 3
    });

    // The worker answers a scrape with the server's own exposition, and nothing but /metrics.
    let (status, body) = http_get(metrics, "/metrics").expect("the worker serves /metrics");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("jq_completions_total{queue=\"m\"} 3"), "{body}");
    assert_eq!(http_get(metrics, "/").map(|(status, _)| status), Some(404));

    let prometheus = Prometheus::start(&dir, metrics);
    let mut seen = None;
    wait_until("Prometheus has scraped the worker", || {
        seen = prometheus.value("jq_completions_total{job=\"jq-worker\",queue=\"m\"}");
        seen.is_some()
    });
    assert_eq!(seen.as_deref(), Some("3"));
    assert_eq!(prometheus.value("jq_claims_total{queue=\"m\"}").as_deref(), Some("3"));
    assert_eq!(prometheus.value("up{job=\"jq-worker\"}").as_deref(), Some("1"));
}
