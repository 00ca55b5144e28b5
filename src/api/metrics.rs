//! Reading the counters: jq_queue_counters(), jq_failure_counts(), jq_metrics() (Prometheus text
//! exposition, format 0.0.4) and jq_stats_reset(). Nothing here reads or writes a job's payload.

use std::fmt::Write;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;

use crate::db;
use crate::shared::counters::{self, Counter, LatencySnapshot, QueueSnapshot};
use crate::shared::front;
use crate::shared::histogram::{bucket_upper, BUCKETS};
use crate::shared::queue_key::{self, Table};
use crate::shared::served::Pass;

const GAUGES: &str = include_str!("../../sql/queries/metrics_gauges.sql");
const HELD: &str = include_str!("../../sql/queries/metrics_held.sql");

/// Counters and recent latency percentiles per queue, since the last reset (or server start). No
/// rows without shared_preload_libraries.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_queue_counters() -> TableIterator<
    'static,
    (
        name!(queue_name, String),
        name!(claims, i64),
        name!(completions, i64),
        name!(failures, i64),
        name!(retries, i64),
        name!(deaths, i64),
        name!(lease_expirations, i64),
        name!(stale_completions, i64),
        name!(stale_heartbeats, i64),
        name!(cancellations, i64),
        name!(wait_p50_seconds, Option<f64>),
        name!(wait_p95_seconds, Option<f64>),
        name!(wait_p99_seconds, Option<f64>),
        name!(run_p50_seconds, Option<f64>),
        name!(run_p95_seconds, Option<f64>),
        name!(run_p99_seconds, Option<f64>),
        name!(counted_since, Option<TimestampWithTimeZone>),
    ),
> {
    TableIterator::new(visible_queues().into_iter().map(move |q| {
        let since = TimestampWithTimeZone::try_from(q.counted_since).ok();
        let c = q.counters.map(|n| n as i64);
        (
            queue_label(&q).to_owned(),
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5],
            c[6],
            c[7],
            c[8],
            q.wait.recent_quantile(0.50),
            q.wait.recent_quantile(0.95),
            q.wait.recent_quantile(0.99),
            q.run.recent_quantile(0.50),
            q.run.recent_quantile(0.95),
            q.run.recent_quantile(0.99),
            since,
        )
    }))
}

/// Failures per queue and error code; `error_code` NULL counts the codes beyond the first 16 a
/// queue reported.
#[pg_extern(volatile, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_failure_counts(
) -> TableIterator<'static, (name!(queue_name, String), name!(error_code, Option<String>), name!(failures, i64))> {
    let rows: Vec<_> = visible_queues()
        .into_iter()
        .flat_map(|q| {
            let queue = queue_label(&q).to_owned();
            let mut rows: Vec<_> = q
                .errors
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(code, n)| (queue.clone(), Some(code.clone()), *n as i64))
                .collect();
            if q.other_errors > 0 {
                rows.push((queue, None, q.other_errors as i64));
            }
            rows
        })
        .collect();
    TableIterator::new(rows)
}

/// Zeroes the counters and histograms of every queue.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_stats_reset() {
    counters::reset();
}

/// Every figure an operator alerts on, as Prometheus text exposition (format 0.0.4), so that a
/// scraper reads it with one query. The gauges come from jq_queue_stats and jq_queue_health (so
/// this reads only what a pg_monitor member may read); counters, histograms and the refusals of the
/// shared-memory tables from shared memory (without preload, the claim fronts' segment).
// Restricted: it runs SPI queries, which belong in the leader.
#[pg_extern(volatile, parallel_restricted)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_metrics() -> spi::Result<String> {
    // The gauges read the views as this library knows them: SQL definitions of another version
    // (until ALTER EXTENSION pg_jobqueue UPDATE) are refused as every other function refuses them.
    if crate::rights::outdated() {
        crate::error::update_needed();
    }
    let mut out = String::new();
    counter_families(&mut out);
    gauge_families(&mut out)?;
    Ok(out)
}

fn queue_label(q: &QueueSnapshot) -> &str {
    &q.queue_name
}

/// This database's queues whose figures the caller may read.
fn visible_queues() -> Vec<QueueSnapshot> {
    counters::snapshot(crate::rights::may_see)
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn counter_families(out: &mut String) {
    let queues = visible_queues();
    header(out, "jq_stats_available", "gauge", "1 if counters are kept (the library is preloaded), else 0.");
    let _ = writeln!(out, "jq_stats_available {}", u8::from(crate::guc::preloaded()));
    if crate::guc::preloaded() {
        header(
            out,
            "jq_stats_reset_timestamp_seconds",
            "gauge",
            "When the queue's counters were last reset, or the server started.",
        );
        for q in &queues {
            let _ = writeln!(
                out,
                "jq_stats_reset_timestamp_seconds{{queue=\"{}\"}} {}",
                escape(queue_label(q)),
                unix_seconds(q.counted_since)
            );
        }
    }
    // Preloaded, every shared-memory table; without preload only the claim fronts, which live in
    // a segment of their own then (guide, "Set up": "Preload, or not").
    let tables: &[Table] = if crate::guc::preloaded() {
        &Table::ALL
    } else if front::in_shared_memory() {
        &[Table::ClaimFronts]
    } else {
        &[]
    };
    if !tables.is_empty() {
        header(
            out,
            "jq_shared_slots_refused_total",
            "counter",
            "Queues of this database that found no entry of their own in a shared-memory table, once per session and queue: counters (counted under queue \"*\"), claim_fronts (claims walk from the queue's start), listeners (a LISTEN past the session's limit, which switches no NOTIFY on).",
        );
        for table in tables {
            let _ = writeln!(
                out,
                "jq_shared_slots_refused_total{{table=\"{}\"}} {}",
                table.label(),
                queue_key::refusals(*table)
            );
        }
    }
    for (i, (name, help)) in Counter::NAMES.iter().zip(Counter::HELP).enumerate() {
        let family = format!("jq_{name}_total");
        header(out, &family, "counter", help);
        for q in &queues {
            let _ = writeln!(out, "{family}{{queue=\"{}\"}} {}", escape(queue_label(q)), q.counters[i]);
        }
    }
    header(
        out,
        "jq_failures_by_code_total",
        "counter",
        "Failed attempts by error code: the first 16 codes of each queue (the rest in jq_failures_other_codes_total).",
    );
    for q in &queues {
        for (code, n) in &q.errors {
            let _ = writeln!(
                out,
                "jq_failures_by_code_total{{queue=\"{}\",error_code=\"{}\"}} {n}",
                escape(queue_label(q)),
                escape(code)
            );
        }
    }
    header(
        out,
        "jq_failures_other_codes_total",
        "counter",
        "Failed attempts whose code is not among the queue's first 16.",
    );
    for q in &queues {
        let _ =
            writeln!(out, "jq_failures_other_codes_total{{queue=\"{}\"}} {}", escape(queue_label(q)), q.other_errors);
    }
    latency_families(out, &queues, "jq_wait_seconds", "Time from a job's available_at to its claim.", |q| &q.wait);
    latency_families(out, &queues, "jq_run_seconds", "Time from a job's claim to its completion.", |q| &q.run);
}

/// A histogram since the last reset (buckets 4x apart from 1 ms), and the p50/p95/p99 of the last
/// five minutes as a gauge.
fn latency_families(
    out: &mut String,
    queues: &[QueueSnapshot],
    name: &str,
    help: &str,
    latency: impl Fn(&QueueSnapshot) -> &LatencySnapshot,
) {
    header(out, name, "histogram", help);
    for q in queues {
        let (l, queue) = (latency(q), escape(queue_label(q)));
        let mut cumulative = 0;
        for (bucket, n) in l.total.iter().enumerate() {
            cumulative += n;
            if bucket % 8 == 0 && bucket < BUCKETS - 1 {
                let _ =
                    writeln!(out, "{name}_bucket{{queue=\"{queue}\",le=\"{}\"}} {cumulative}", bucket_upper(bucket));
            }
        }
        let _ = writeln!(out, "{name}_bucket{{queue=\"{queue}\",le=\"+Inf\"}} {cumulative}");
        let _ = writeln!(out, "{name}_sum{{queue=\"{queue}\"}} {}", l.sum_seconds);
        let _ = writeln!(out, "{name}_count{{queue=\"{queue}\"}} {}", l.count());
    }
    let recent = format!("{name}_recent");
    header(out, &recent, "gauge", &format!("{help} Quantiles over the last five minutes, within 19%."));
    for q in queues {
        for p in [0.5, 0.95, 0.99] {
            if let Some(v) = latency(q).recent_quantile(p) {
                let _ = writeln!(out, "{recent}{{queue=\"{}\",quantile=\"{p}\"}} {v}", escape(queue_label(q)));
            }
        }
    }
}

/// Gauges from the tables: jobs by status, ages, expiring leases, health warnings, and the jobs
/// each flow control limit holds back.
fn gauge_families(out: &mut String) -> spi::Result<()> {
    type Row = (String, [i64; 6], [f64; 2], [bool; 3]);
    type Columns = (
        Option<String>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<i64>,
        Option<f64>,
        Option<f64>,
        Option<bool>,
        Option<bool>,
        Option<bool>,
    );
    let rows: Vec<Row> = db::read_only_rows::<Columns>(GAUGES, &[])?
        .into_iter()
        .map(|(queue, a, b, c, d, e, f, g, h, i, j, k)| {
            let n = |v: Option<i64>| v.unwrap_or(0);
            let x = |v: Option<f64>| v.unwrap_or(0.0);
            let w = |v: Option<bool>| v.unwrap_or(false);
            (queue.unwrap_or_default(), [n(a), n(b), n(c), n(d), n(e), n(f)], [x(g), x(h)], [w(i), w(j), w(k)])
        })
        .collect();
    header(out, "jq_jobs", "gauge", "Jobs by status (pending: claimable now; scheduled: due later).");
    for (queue, counts, _, _) in &rows {
        for (status, n) in ["pending", "scheduled", "running", "dead", "cancelled"].iter().zip(counts) {
            let _ = writeln!(out, "jq_jobs{{queue=\"{}\",status=\"{status}\"}} {n}", escape(queue));
        }
    }
    let gauges = [
        ("jq_oldest_claimable_age_seconds", "Age of the oldest claimable job (0: none)."),
        ("jq_oldest_dead_age_seconds", "Age of the oldest dead job not yet re-driven or purged (0: none)."),
    ];
    for (i, (name, help)) in gauges.iter().enumerate() {
        header(out, name, "gauge", help);
        for (queue, _, ages, _) in &rows {
            let _ = writeln!(out, "{name}{{queue=\"{}\"}} {}", escape(queue), ages[i]);
        }
    }
    header(out, "jq_expiring_leases", "gauge", "Running jobs whose lease ends within 10 s, or has ended.");
    for (queue, counts, _, _) in &rows {
        let _ = writeln!(out, "jq_expiring_leases{{queue=\"{}\"}} {}", escape(queue), counts[5]);
    }
    header(out, "jq_health_warning", "gauge", "1 when a jq_queue_health check is past its queue's threshold.");
    for (queue, _, _, warnings) in &rows {
        for (check, on) in ["claimable_age", "expiring_leases", "dead_age"].iter().zip(warnings) {
            let _ =
                writeln!(out, "jq_health_warning{{queue=\"{}\",check=\"{check}\"}} {}", escape(queue), u8::from(*on));
        }
    }
    header(
        out,
        "jq_held_back_jobs",
        "gauge",
        "Jobs a limit, a pause or an unfinished dependency holds back now, by limit.",
    );
    type Held = (Option<String>, Option<i64>, Option<i64>, Option<i64>, Option<i64>, Option<i64>, Option<i64>);
    for (queue, a, b, c, d, e, f) in db::read_only_rows::<Held>(HELD, &[])? {
        let limits =
            ["concurrency_limit", "key_concurrency_limit", "rate_limit", "key_rate_limit", "pause", "dependency"];
        for (limit, n) in limits.iter().zip([a, b, c, d, e, f]) {
            let (queue, n) = (escape(&queue.clone().unwrap_or_default()), n.unwrap_or(0));
            let _ = writeln!(out, "jq_held_back_jobs{{queue=\"{queue}\",limit=\"{limit}\"}} {n}");
        }
    }
    maintenance_family(out)
}

/// This database's maintenance, as `jq_maintenance` shows it.
fn maintenance_family(out: &mut String) -> spi::Result<()> {
    let status = crate::rights::as_owner(super::maintenance::status)?;
    header(
        out,
        "jq_maintenance_stale",
        "gauge",
        "1 when a maintenance pass of this database is overdue (jq_maintenance).",
    );
    let _ = writeln!(out, "jq_maintenance_stale {}", u8::from(status.stale));
    header(
        out,
        "jq_maintenance_served",
        "gauge",
        "1 for who maintains this database now: worker, inline (claims) or none.",
    );
    for by in ["worker", "inline", "none"] {
        let _ = writeln!(out, "jq_maintenance_served{{by=\"{by}\"}} {}", u8::from(status.served_by == by));
    }
    header(
        out,
        "jq_maintenance_last_pass_timestamp_seconds",
        "gauge",
        "When each maintenance pass last ran in this database (no series: never).",
    );
    for pass in Pass::ALL {
        if let Some(at) = status.last[pass as usize] {
            let _ = writeln!(
                out,
                "jq_maintenance_last_pass_timestamp_seconds{{pass=\"{}\"}} {}",
                pass.label(),
                unix_seconds(at)
            );
        }
    }
    Ok(())
}

/// A label value as the exposition format wants it: backslash, double quote and newline escaped.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A TimestampTz (microseconds since 2000-01-01) as Unix seconds.
fn unix_seconds(at: i64) -> f64 {
    const POSTGRES_EPOCH_UNIX_SECONDS: f64 = 946_684_800.0;
    at as f64 / 1e6 + POSTGRES_EPOCH_UNIX_SECONDS
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn stats_count_each_state_per_queue() {
        run("SELECT jq_enqueue_batch('s', array_fill('{}'::jsonb, ARRAY[4]))");
        run("SELECT jq_enqueue('s', '{}', run_at => clock_timestamp() + interval '1 hour')");
        let (id, token) = claim("s", "w", "5 s").unwrap();
        let (dead, _) = claim("s", "w", "1 hour").unwrap();
        run(&format!("UPDATE jq_live_jobs SET status = 'dead', lease_owner = NULL, lease_expires_at = NULL, finished_at = now() - interval '1 minute' WHERE id = {dead}"));
        let cancelled = enqueue("s");
        run(&format!("SELECT jq_cancel({cancelled})"));
        assert!(one::<bool>(
            "SELECT pending = 2 AND scheduled = 1 AND running = 1 AND expiring_10s = 1 AND dead = 1
                AND cancelled = 1 AND oldest_claimable_age IS NOT NULL AND oldest_dead_age >= interval '1 minute'
             FROM jq_queue_stats WHERE queue_name = 's'"
        ));
        assert!(complete(id, "w", token));
    }

    #[pg_test]
    fn health_flags_trip_at_their_thresholds() {
        let flags = |queue: &str| -> (bool, bool, bool) {
            Spi::connect(|c| {
                let row = c
                    .select(
                        "SELECT claimable_age_warning, expiring_leases_warning, dead_age_warning
                         FROM jq_queue_health WHERE queue_name = $1",
                        None,
                        &[queue.into()],
                    )?
                    .first();
                Ok::<_, pgrx::spi::Error>((
                    row.get::<bool>(1)?.unwrap(),
                    row.get::<bool>(2)?.unwrap(),
                    row.get::<bool>(3)?.unwrap(),
                ))
            })
            .unwrap()
        };
        // A queue without settings: claimable for 6 minutes is past the default 5.
        enqueue("h");
        run("UPDATE jq_live_jobs SET available_at = clock_timestamp() - interval '6 minutes' WHERE id IN (SELECT id FROM jq_jobs WHERE queue_name = 'h')");
        assert_eq!(flags("h"), (true, false, false));
        run("INSERT INTO jq_queues (queue_name, warn_claimable_age) VALUES ('h', '10 minutes')");
        assert_eq!(flags("h"), (false, false, false));
        run("UPDATE jq_queues SET warn_claimable_age = '5 minutes 59 seconds' WHERE queue_name = 'h'");
        assert!(flags("h").0);

        // Three leases ending within 10 s: the flag trips at 3, not at 4.
        run("SELECT jq_enqueue_batch('h2', array_fill('{}'::jsonb, ARRAY[3]))");
        run("SELECT count(*) FROM jq_claim('h2', 'w', interval '5 seconds', 3)");
        run("INSERT INTO jq_queues (queue_name, warn_expiring_leases) VALUES ('h2', 4)");
        assert_eq!(flags("h2"), (false, false, false));
        run("UPDATE jq_queues SET warn_expiring_leases = 3 WHERE queue_name = 'h2'");
        assert_eq!(flags("h2"), (false, true, false));

        // A job dead for two hours is past the default hour; NULL turns the check off.
        enqueue("h3");
        run("SELECT jq_fail(id, 'w', lease_token, 'E', retryable => false) FROM jq_claim('h3', 'w')");
        run("UPDATE jq_live_jobs SET finished_at = clock_timestamp() - interval '2 hours' WHERE id IN (SELECT id FROM jq_jobs WHERE queue_name = 'h3')");
        assert_eq!(flags("h3"), (false, false, true));
        run("INSERT INTO jq_queues (queue_name, warn_dead_age) VALUES ('h3', NULL)");
        assert_eq!(flags("h3"), (false, false, false));
    }

    #[pg_test]
    fn without_preload_there_are_no_counters_and_metrics_still_render() {
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_queue_counters()"), 0);
        enqueue("m");
        let metrics = one::<String>("SELECT jq_metrics()");
        assert!(metrics.contains("jq_stats_available 0\n"), "{metrics}");
        assert!(metrics.contains("jq_jobs{queue=\"m\",status=\"pending\"} 1\n"), "{metrics}");
    }
}
