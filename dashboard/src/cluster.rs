//! `--metrics-all-databases`: one scrape of `/metrics` for every database of the server. Each
//! scrape lists the databases the role may connect to (databases.sql), connects to each with the
//! connection string's parameters and that database's name, at most four at a time, reads
//! `jq_metrics()` where the extension is installed, and closes the connection again: between
//! scrapes it holds none, so no `DROP DATABASE` or `CREATE DATABASE ... TEMPLATE` waits on it.
//! The texts are merged into one exposition, every series with a `database` label and each family
//! once, and `jq_scrape_database_up{database}` says which databases were read (1) and which could
//! not be (0). One database that fails never fails the scrape (guide, "Operating").

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::{timeout_at, Instant};
use tokio_postgres::{Client, Config, NoTls};

use crate::db::{sql, DbError};

/// At most this many databases are read at once, each on a connection of its own.
const AT_ONCE: usize = 4;
/// A scrape answers within this time (Prometheus gives up after 10 s by default); a database not
/// read by then counts as not read.
const DEADLINE: Duration = Duration::from_secs(8);

/// What reading one database gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The text of its `jq_metrics()`.
    Metrics(String),
    /// It has no pg_jobqueue: nothing to report.
    NoExtension,
    /// It could not be read: the reason, logged.
    Failed(String),
}

pub struct Cluster {
    config: Config,
    /// The databases whose last read failed: a failure is logged when it begins, and again when it
    /// ends, not at every scrape.
    failing: Mutex<BTreeSet<String>>,
}

impl Cluster {
    /// The server of the connection string `dsn` (already checked by the argument parser).
    pub fn new(dsn: &str) -> Result<Cluster, String> {
        let mut config: Config = dsn.parse().map_err(|error| format!("--dsn: {error}"))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(DEADLINE);
        }
        Ok(Cluster { config, failing: Mutex::new(BTreeSet::new()) })
    }

    /// The exposition of every database: an error only when the databases cannot be listed.
    pub async fn scrape(&self) -> Result<String, DbError> {
        let deadline = Instant::now() + DEADLINE;
        let names = match timeout_at(deadline, self.databases()).await {
            Ok(names) => names?,
            Err(_) => return Err(DbError::Unavailable(format!("the databases were not listed within {DEADLINE:?}"))),
        };
        let permits = Arc::new(Semaphore::new(AT_ONCE));
        let mut tasks = JoinSet::new();
        for (i, name) in names.iter().enumerate() {
            let mut config = self.config.clone();
            config.dbname(name);
            let permits = permits.clone();
            tasks.spawn(async move {
                let read = async {
                    let _permit = permits.acquire_owned().await.expect("the semaphore is never closed");
                    read(&config).await
                };
                let outcome = match timeout_at(deadline, read).await {
                    Ok(outcome) => outcome,
                    Err(_) => Outcome::Failed(format!("not read within {DEADLINE:?}")),
                };
                (i, outcome)
            });
        }
        let mut outcomes = vec![Outcome::Failed("not read".into()); names.len()];
        while let Some(joined) = tasks.join_next().await {
            if let Ok((i, outcome)) = joined {
                outcomes[i] = outcome;
            }
        }
        let reads: Vec<(String, Outcome)> = names.into_iter().zip(outcomes).collect();
        self.log_changes(&reads);
        Ok(merge(&reads))
    }

    /// The databases of databases.sql, asked on the connection string's own database.
    async fn databases(&self) -> Result<Vec<String>, DbError> {
        let client = connect(&self.config).await?;
        let rows = client.query(sql::DATABASES, &[]).await?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    fn log_changes(&self, reads: &[(String, Outcome)]) {
        let mut failing = self.failing.lock().unwrap();
        for (name, outcome) in reads {
            match outcome {
                Outcome::Failed(error) if failing.insert(name.clone()) => {
                    eprintln!("jq-dashboard: /metrics: database {name} not read: {error}");
                }
                Outcome::Failed(_) => {}
                _ if failing.remove(name) => eprintln!("jq-dashboard: /metrics: database {name} read again"),
                _ => {}
            }
        }
        // A database gone from the list is forgotten.
        failing.retain(|name| reads.iter().any(|(read, _)| read == name));
    }
}

async fn connect(config: &Config) -> Result<Client, DbError> {
    let (client, connection) = config.connect(NoTls).await.map_err(|error| DbError::Unavailable(error.to_string()))?;
    tokio::spawn(async move {
        // It ends when the client is dropped, after the read.
        let _ = connection.await;
    });
    Ok(client)
}

/// One database: session.sql (no row: no extension), then `jq_metrics()`.
async fn read(config: &Config) -> Outcome {
    let result = async {
        let client = connect(config).await?;
        if client.query(sql::SESSION, &[]).await?.is_empty() {
            return Ok(Outcome::NoExtension);
        }
        let text: String = client.query_one(sql::METRICS, &[]).await?.get(0);
        Ok::<_, DbError>(Outcome::Metrics(text))
    }
    .await;
    result.unwrap_or_else(|error| Outcome::Failed(error.to_string()))
}

/// A label value as the text format writes it.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// `line`, a sample, with the label `database` first.
fn labelled(line: &str, database: &str) -> String {
    let label = format!("database=\"{}\"", escape(database));
    match line.find(['{', ' ']) {
        Some(at) if line[at..].starts_with("{}") => format!("{}{{{label}}}{}", &line[..at], &line[at + 2..]),
        Some(at) if line[at..].starts_with('{') => format!("{}{{{label},{}", &line[..at], &line[at + 1..]),
        Some(at) => format!("{}{{{label}}}{}", &line[..at], &line[at..]),
        None => line.to_owned(),
    }
}

/// The family a `# HELP` or `# TYPE` line names.
fn family_of(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE "))?;
    rest.split(' ').next()
}

/// One exposition of every database read: `jq_scrape_database_up` first, then each family of
/// their texts once, in the order it first appears, with its first header and the samples of
/// every database (the text format allows a family only once).
pub fn merge(reads: &[(String, Outcome)]) -> String {
    let mut out = String::from(
        "# HELP jq_scrape_database_up 1 when jq-dashboard read this database's jq_metrics(), 0 when it could not (its log says why).\n\
         # TYPE jq_scrape_database_up gauge\n",
    );
    for (name, outcome) in reads {
        let up = match outcome {
            Outcome::Metrics(_) => 1,
            Outcome::Failed(_) => 0,
            Outcome::NoExtension => continue,
        };
        out.push_str(&format!("jq_scrape_database_up{{database=\"{}\"}} {up}\n", escape(name)));
    }
    // Families by first appearance: the header lines, and the samples.
    let mut families: Vec<(String, Vec<String>, Vec<String>)> = Vec::new();
    for (name, outcome) in reads {
        let Outcome::Metrics(text) = outcome else { continue };
        let mut current: Option<usize> = None;
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            if let Some(family) = family_of(line) {
                let index = match families.iter().position(|(f, _, _)| f == family) {
                    Some(index) => index,
                    None => {
                        families.push((family.to_owned(), Vec::new(), Vec::new()));
                        families.len() - 1
                    }
                };
                let headers = &mut families[index].1;
                let kind = &line[..6];
                if !headers.iter().any(|header| header.starts_with(kind)) {
                    headers.push(line.to_owned());
                }
                current = Some(index);
            } else if line.starts_with('#') {
                // Another comment: nothing a scraper reads.
            } else {
                let index = match current {
                    Some(index) => index,
                    None => {
                        // A sample without a header: a family of its own name.
                        let family = line.split(['{', ' ']).next().unwrap_or(line).to_owned();
                        families.push((family, Vec::new(), Vec::new()));
                        families.len() - 1
                    }
                };
                families[index].2.push(labelled(line, name));
            }
        }
    }
    for (_, headers, samples) in families {
        for line in headers.iter().chain(&samples) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const APP: &str = "# HELP jq_stats_available 1 if counters are kept.\n\
                       # TYPE jq_stats_available gauge\n\
                       jq_stats_available 1\n\
                       # HELP jq_claims_total Jobs claimed.\n\
                       # TYPE jq_claims_total counter\n\
                       jq_claims_total{queue=\"emails\"} 3\n\
                       # HELP jq_wait_seconds Time to the claim.\n\
                       # TYPE jq_wait_seconds histogram\n\
                       jq_wait_seconds_bucket{queue=\"emails\",le=\"+Inf\"} 3\n\
                       jq_wait_seconds_sum{queue=\"emails\"} 0.5\n\
                       jq_wait_seconds_count{queue=\"emails\"} 3\n";

    #[test]
    fn every_family_once_with_every_database_labelled() {
        let other = APP.replace("\"emails\"} 3", "\"emails\"} 7").replace("counters are kept", "other words");
        let reads = vec![
            ("app".to_owned(), Outcome::Metrics(APP.to_owned())),
            ("bare".to_owned(), Outcome::NoExtension),
            ("down".to_owned(), Outcome::Failed("too many connections".into())),
            ("we\"ird\\db".to_owned(), Outcome::Metrics(other)),
        ];
        let text = merge(&reads);
        let expected = "# HELP jq_scrape_database_up 1 when jq-dashboard read this database's jq_metrics(), 0 when it could not (its log says why).\n\
             # TYPE jq_scrape_database_up gauge\n\
             jq_scrape_database_up{database=\"app\"} 1\n\
             jq_scrape_database_up{database=\"down\"} 0\n\
             jq_scrape_database_up{database=\"we\\\"ird\\\\db\"} 1\n\
             # HELP jq_stats_available 1 if counters are kept.\n\
             # TYPE jq_stats_available gauge\n\
             jq_stats_available{database=\"app\"} 1\n\
             jq_stats_available{database=\"we\\\"ird\\\\db\"} 1\n\
             # HELP jq_claims_total Jobs claimed.\n\
             # TYPE jq_claims_total counter\n\
             jq_claims_total{database=\"app\",queue=\"emails\"} 3\n\
             jq_claims_total{database=\"we\\\"ird\\\\db\",queue=\"emails\"} 7\n\
             # HELP jq_wait_seconds Time to the claim.\n\
             # TYPE jq_wait_seconds histogram\n\
             jq_wait_seconds_bucket{database=\"app\",queue=\"emails\",le=\"+Inf\"} 3\n\
             jq_wait_seconds_sum{database=\"app\",queue=\"emails\"} 0.5\n\
             jq_wait_seconds_count{database=\"app\",queue=\"emails\"} 3\n\
             jq_wait_seconds_bucket{database=\"we\\\"ird\\\\db\",queue=\"emails\",le=\"+Inf\"} 3\n\
             jq_wait_seconds_sum{database=\"we\\\"ird\\\\db\",queue=\"emails\"} 0.5\n\
             jq_wait_seconds_count{database=\"we\\\"ird\\\\db\",queue=\"emails\"} 7\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_family_only_one_database_has_and_samples_without_labels() {
        assert_eq!(labelled("jq_x 1", "d"), "jq_x{database=\"d\"} 1");
        assert_eq!(labelled("jq_x{} 1", "d"), "jq_x{database=\"d\"} 1");
        assert_eq!(labelled("jq_x{a=\"b c\"} 1", "d"), "jq_x{database=\"d\",a=\"b c\"} 1");
        assert_eq!(labelled("jq_x{a=\"b\"} 1", "line\nbreak"), "jq_x{database=\"line\\nbreak\",a=\"b\"} 1");
        let newer = "# HELP jq_new New.\n# TYPE jq_new gauge\njq_new 2\n";
        let reads = vec![
            ("old".to_owned(), Outcome::Metrics("jq_bare 1\n".to_owned())),
            ("new".to_owned(), Outcome::Metrics(newer.to_owned())),
        ];
        let text = merge(&reads);
        assert!(
            text.ends_with(
                "jq_bare{database=\"old\"} 1\n# HELP jq_new New.\n# TYPE jq_new gauge\njq_new{database=\"new\"} 2\n"
            ),
            "{text}"
        );
        // Nothing read: the up family alone, still valid.
        assert_eq!(merge(&[]).lines().count(), 2);
    }
}
