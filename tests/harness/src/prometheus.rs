//! Prometheus' side of the monitoring tests: samples of the text exposition format as a scrape
//! gives them, the alert rules of a file in `monitoring/` as its own layout writes them, and
//! promtool. Read by the test of jq-dashboard's scrape (dashboard/tests/alerts.rs) and by that of
//! postgres_exporter's (tests/harness/tests/monitoring.rs).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

const PROMTOOL: &str = "/usr/bin/promtool";

/// A sample: its name, labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: String,
}

impl Sample {
    /// One line of a scrape; None for a comment or an empty line.
    pub fn parse(line: &str) -> Option<Sample> {
        if line.starts_with('#') || line.trim().is_empty() {
            return None;
        }
        let (series, value) = line.rsplit_once(' ')?;
        let Some((name, mut rest)) = series.split_once('{') else {
            return Some(Sample { name: series.to_owned(), labels: BTreeMap::new(), value: value.to_owned() });
        };
        let mut labels = BTreeMap::new();
        // key="value" pairs, the value with \\, \" and \n escaped.
        while let Some((key, after)) = rest.split_once("=\"") {
            let mut value = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                match chars.next()? {
                    (_, '\\') => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    (i, '"') => break i,
                    (_, c) => value.push(c),
                }
            };
            labels.insert(key.trim_start_matches(',').to_owned(), value);
            rest = &after[end + 1..];
        }
        Some(Sample { name: name.to_owned(), labels, value: value.to_owned() })
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }

    /// The series, as a PromQL selector.
    pub fn series(&self) -> String {
        let labels: Vec<String> = self.labels.iter().map(|(k, v)| format!("{k}={}", quoted(v))).collect();
        format!("{}{{{}}}", self.name, labels.join(","))
    }
}

/// Every sample of a scrape's text.
pub fn samples(text: &str) -> Vec<Sample> {
    text.lines().filter_map(Sample::parse).collect()
}

/// `text` as a double-quoted string of JSON and PromQL alike.
pub fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))
}

/// A JSON object of strings.
pub fn json_map(map: &BTreeMap<String, String>) -> String {
    let items: Vec<String> = map.iter().map(|(k, v)| format!("{}: {}", quoted(k), quoted(v))).collect();
    format!("{{{}}}", items.join(", "))
}

/// An alerting rule of a file in `monitoring/`.
#[derive(Debug)]
pub struct Rule {
    pub alert: String,
    pub expr: String,
    pub labels: Vec<(String, String)>,
    pub annotations: Vec<(String, String)>,
}

fn yaml_value(text: &str) -> String {
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(inner) => inner.replace("\\\"", "\"").replace("\\\\", "\\"),
        None => text.to_owned(),
    }
}

/// The rules of `file`, read line by line in the layout of the files in `monitoring/`: `- alert:`,
/// `expr:`, `for:`, then `labels:` and `annotations:` with one `key: value` a line.
pub fn rules(file: &Path) -> Vec<Rule> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut rules: Vec<Rule> = Vec::new();
    let mut section = "";
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(alert) = trimmed.strip_prefix("- alert: ") {
            rules.push(Rule { alert: alert.to_owned(), expr: String::new(), labels: vec![], annotations: vec![] });
            section = "";
            continue;
        }
        let Some(rule) = rules.last_mut() else { continue };
        if let Some(expr) = trimmed.strip_prefix("expr: ") {
            rule.expr = yaml_value(expr);
        } else if trimmed == "labels:" || trimmed == "annotations:" {
            section = trimmed.trim_end_matches(':');
        } else if let Some((key, value)) = trimmed.split_once(": ") {
            match section {
                "labels" => rule.labels.push((key.to_owned(), yaml_value(value))),
                "annotations" => rule.annotations.push((key.to_owned(), yaml_value(value))),
                _ => {}
            }
        }
    }
    rules
}

/// `template` with each `{{ $labels.NAME }}` replaced as Prometheus renders it; a label the alert
/// does not have fails the test (Prometheus would print "<no value>").
pub fn render(template: &str, labels: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        let end = after.find("}}").expect("a closed template") + 2;
        let label = after[..end]
            .strip_prefix("{{ $labels.")
            .and_then(|t| t.strip_suffix(" }}"))
            .unwrap_or_else(|| panic!("a template the test does not render: {}", &after[..end]));
        out.push_str(labels.get(label).unwrap_or_else(|| panic!("the alert has no label {label}: {labels:?}")));
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Runs promtool with `args` and `input` on its standard input: its exit code and what it printed.
pub fn promtool(args: &[&str], input: Option<&str>) -> (Option<i32>, String) {
    let mut child = Command::new(PROMTOOL)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.unwrap_or("").as_bytes()).unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.code(), text)
}
