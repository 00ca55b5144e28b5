//! Every argument of every function, one at a time, with NULLs, extremes, mixed-unit intervals,
//! huge arrays and keys: each refusal is 22004 or 22023 and names the argument, a refused call
//! writes nothing, and no call fails with any other SQLSTATE.

use jq_harness::{Client, Cluster};

const TEXT: &[&str] =
    &["NULL", "''", "repeat('x', 61)", "repeat('x', 300)", "repeat('x', 10000)", "'bad name'", "'é😀'", "'ok'"];
const INT: &[&str] = &["NULL", "(-2147483648)", "(-1)", "0", "1", "2147483647"];
const BIGINT: &[&str] = &["NULL", "(-9223372036854775808)::bigint", "0::bigint", "9223372036854775807::bigint"];
const INTERVAL: &[&str] = &[
    "NULL",
    "interval '0'",
    "interval '-1 s'",
    "interval '1 microsecond'",
    "interval '1 mon -30 days 23:59:59'",
    "interval '-1 day 25 hours'",
    "interval '2147483647 days'",
    "interval '178000000 years'",
    "interval '-178000000 years'",
    "interval '1 s'",
];
const TIMESTAMPTZ: &[&str] = &[
    "NULL",
    "'infinity'::timestamptz",
    "'-infinity'::timestamptz",
    "'294276-12-31 23:59:59+00'::timestamptz",
    "'4713-01-01 00:00:00+00 BC'::timestamptz",
];
const JSONB: &[&str] =
    &["NULL", "'{}'::jsonb", "('\"' || repeat('x', 2000000) || '\"')::jsonb", "'[1, {\"a\": null}]'::jsonb"];
const JSONB_ARRAY: &[&str] = &[
    "NULL",
    "ARRAY[]::jsonb[]",
    "ARRAY[NULL]::jsonb[]",
    "array_fill('{}'::jsonb, ARRAY[1001])",
    "array_fill('{}'::jsonb, ARRAY[100000])",
];
const BIGINT_ARRAY: &[&str] =
    &["NULL", "ARRAY[]::bigint[]", "ARRAY[NULL]::bigint[]", "array_fill(1::bigint, ARRAY[100000])"];
const BOOLEAN: &[&str] = &["NULL", "true", "false"];
const SETTINGS: &[&str] = &[
    "NULL",
    "'[]'::jsonb",
    "'{\"x\": 1}'::jsonb",
    "'{\"default_lease\": \"300000 years\"}'::jsonb",
    "'{\"default_lease\": \"1 mon -30 days 23:59:59\"}'::jsonb",
    "'{\"default_lease\": \"30 days\"}'::jsonb",
    "'{\"retention\": \"10000 years\"}'::jsonb",
    "'{\"starvation_limit\": \"-1 s\"}'::jsonb",
    "'{\"max_attempts\": \"many\"}'::jsonb",
    "'{\"max_attempts\": null}'::jsonb",
    "'{\"max_attempts\": 99999999999}'::jsonb",
    "'{\"backoff_base\": \"2 hours\", \"backoff_cap\": \"1 hour\"}'::jsonb",
    "'{\"concurrency_limit\": null}'::jsonb",
];
const PRIVILEGE: &[&str] = &["NULL", "''", "'everything'", "'consume'"];
const STATUS: &[&str] = &["NULL", "'pending'::jq_status", "'succeeded'::jq_status", "'dead'::jq_status"];
const KEY_SETTINGS: &[&str] = &[
    "NULL",
    "'[]'::jsonb",
    "'{\"x\": 1}'::jsonb",
    "'{\"weight\": 0}'::jsonb",
    "'{\"weight\": 1001}'::jsonb",
    "'{\"concurrency_limit\": -1}'::jsonb",
    "'{\"concurrency_limit\": null, \"weight\": 3}'::jsonb",
];
const CRON: &[&str] = &[
    "NULL",
    "''",
    "'* * * *'",
    "'61 * * * * *'",
    "'0 0 30 2 *'",
    "'*/0 * * * *'",
    "'@never'",
    "'0 0 29 2 *'",
    "'*/10 * * * * *'",
    "repeat('* ', 10000)",
];
const TIME_ZONE: &[&str] = &["NULL", "''", "'Mars/Olympus'", "'Europe/Paris'", "repeat('x', 10000)", "'UTC+3'"];
const CATCH_UP: &[&str] = &["NULL", "''", "'sometimes'", "'each'"];

/// One argument of a function: its name, a valid value, and the values to try.
type Argument = (&'static str, String, &'static [&'static str]);

/// (function, its arguments)
fn functions(job: i64, token: i64) -> Vec<(&'static str, Vec<Argument>)> {
    let q = || "'fz'".to_owned();
    let id = || job.to_string();
    let tok = || token.to_string();
    vec![
        (
            "jq_enqueue",
            vec![
                ("queue_name", q(), TEXT),
                ("payload", "'{}'".into(), JSONB),
                ("priority", "0".into(), INT),
                ("run_at", "NULL".into(), TIMESTAMPTZ),
                ("max_attempts", "NULL".into(), INT),
                ("dedup_key", "NULL".into(), TEXT),
                ("ordering_key", "NULL".into(), TEXT),
                ("concurrency_key", "NULL".into(), TEXT),
                ("expires_at", "NULL".into(), TIMESTAMPTZ),
            ],
        ),
        (
            "jq_enqueue_batch",
            vec![
                ("queue_name", q(), TEXT),
                ("payloads", "ARRAY['{}'::jsonb]".into(), JSONB_ARRAY),
                ("priority", "0".into(), INT),
                ("run_at", "NULL".into(), TIMESTAMPTZ),
                ("max_attempts", "NULL".into(), INT),
                ("concurrency_key", "NULL".into(), TEXT),
                ("expires_at", "NULL".into(), TIMESTAMPTZ),
            ],
        ),
        (
            "jq_claim",
            vec![
                ("queue_name", "'fz-empty'".into(), TEXT),
                ("worker", "'w'".into(), TEXT),
                ("lease", "NULL".into(), INTERVAL),
                ("batch_size", "1".into(), INT),
                ("wait", "NULL".into(), INTERVAL),
            ],
        ),
        (
            "jq_heartbeat",
            vec![
                ("job_id", id(), BIGINT),
                ("worker", "'w'".into(), TEXT),
                ("lease_token", tok(), BIGINT),
                ("extend", "NULL".into(), INTERVAL),
            ],
        ),
        (
            "jq_complete",
            vec![
                ("job_id", "0".into(), BIGINT),
                ("worker", "'w'".into(), TEXT),
                ("lease_token", tok(), BIGINT),
                ("result", "NULL".into(), JSONB),
            ],
        ),
        (
            "jq_complete_batch",
            vec![
                ("job_ids", "ARRAY[0::bigint]".into(), BIGINT_ARRAY),
                ("worker", "'w'".into(), TEXT),
                ("lease_tokens", "ARRAY[0::bigint]".into(), BIGINT_ARRAY),
                ("results", "NULL".into(), JSONB_ARRAY),
            ],
        ),
        (
            "jq_progress",
            vec![
                ("job_id", "0".into(), BIGINT),
                ("worker", "'w'".into(), TEXT),
                ("lease_token", tok(), BIGINT),
                ("progress", "'{}'".into(), JSONB),
            ],
        ),
        (
            "jq_progress_of",
            vec![("job_id", id(), BIGINT), ("worker", "'w'".into(), TEXT), ("lease_token", tok(), BIGINT)],
        ),
        (
            "jq_snooze",
            vec![
                ("job_id", "0".into(), BIGINT),
                ("worker", "'w'".into(), TEXT),
                ("lease_token", tok(), BIGINT),
                ("delay", "interval '1 s'".into(), INTERVAL),
            ],
        ),
        ("jq_result", vec![("job_id", id(), BIGINT)]),
        ("jq_await", vec![("job_id", "0".into(), BIGINT), ("wait", "interval '0'".into(), INTERVAL)]),
        (
            "jq_schedule",
            vec![
                ("name", "'fz-schedule'".into(), TEXT),
                ("cron", "'* * * * *'".into(), CRON),
                ("queue_name", q(), TEXT),
                ("payload", "'{}'".into(), JSONB),
                ("time_zone", "'UTC'".into(), TIME_ZONE),
                ("catch_up", "'once'".into(), CATCH_UP),
                ("catch_up_limit", "10".into(), INT),
                ("priority", "0".into(), INT),
                ("max_attempts", "NULL".into(), INT),
                ("dedup_key", "NULL".into(), TEXT),
                ("ordering_key", "NULL".into(), TEXT),
                ("concurrency_key", "NULL".into(), TEXT),
                ("paused", "false".into(), BOOLEAN),
            ],
        ),
        ("jq_pause_schedule", vec![("name", "'fz-schedule'".into(), TEXT)]),
        ("jq_resume_schedule", vec![("name", "'fz-schedule'".into(), TEXT)]),
        ("jq_unschedule", vec![("name", "'fz-none'".into(), TEXT)]),
        (
            "jq_cron_next",
            vec![
                ("cron", "'* * * * *'".into(), CRON),
                ("time_zone", "'UTC'".into(), TIME_ZONE),
                ("after", "NULL".into(), TIMESTAMPTZ),
                ("count", "5".into(), INT),
            ],
        ),
        (
            "jq_fail",
            vec![
                ("job_id", id(), BIGINT),
                ("worker", "'w'".into(), TEXT),
                ("lease_token", "0".into(), BIGINT),
                ("error_code", "'E'".into(), TEXT),
                ("error_message", "NULL".into(), TEXT),
                ("retryable", "true".into(), BOOLEAN),
                ("retry_in", "NULL".into(), INTERVAL),
            ],
        ),
        ("jq_retry", vec![("job_id", "0".into(), BIGINT)]),
        ("jq_cancel", vec![("job_id", "0".into(), BIGINT)]),
        ("jq_purge", vec![("job_id", "0".into(), BIGINT)]),
        (
            "jq_list_jobs",
            vec![
                ("queue_name", q(), TEXT),
                ("status", "NULL".into(), STATUS),
                ("key", "NULL".into(), TEXT),
                ("error_code", "NULL".into(), TEXT),
                ("older_than", "NULL".into(), INTERVAL),
                ("max_rows", "50".into(), INT),
                ("skip_rows", "0".into(), INT),
            ],
        ),
        (
            "jq_retry_dead",
            vec![("queue_name", q(), TEXT), ("error_code", "NULL".into(), TEXT), ("max_jobs", "1".into(), INT)],
        ),
        (
            "jq_purge_dead",
            vec![
                ("queue_name", "'fz-empty'".into(), TEXT),
                ("error_code", "NULL".into(), TEXT),
                ("max_jobs", "1".into(), INT),
            ],
        ),
        ("jq_reap", vec![("max_jobs", "1".into(), INT)]),
        ("jq_prune", vec![("max_jobs", "1".into(), INT)]),
        ("jq_configure", vec![("queue_name", "'fz-settings'".into(), TEXT), ("settings", "'{}'".into(), SETTINGS)]),
        (
            "jq_configure_key",
            vec![
                ("queue_name", "'fz-settings'".into(), TEXT),
                ("concurrency_key", "'k'".into(), TEXT),
                ("settings", "'{}'".into(), KEY_SETTINGS),
            ],
        ),
        (
            "jq_grant",
            vec![
                ("role", "'pg_monitor'".into(), &["NULL"]),
                ("queue", q(), TEXT),
                ("privilege", "'monitor'".into(), PRIVILEGE),
            ],
        ),
        (
            "jq_revoke",
            vec![
                ("role", "'pg_monitor'".into(), &["NULL"]),
                ("queue", q(), TEXT),
                ("privilege", "'monitor'".into(), PRIVILEGE),
            ],
        ),
        ("jq_has_right", vec![("queue_name", q(), TEXT), ("privilege", "'consume'".into(), PRIVILEGE)]),
        ("jq_backoff", vec![("queue_name", q(), TEXT), ("attempt", "1".into(), INT)]),
    ]
}

/// Everything a call could write.
fn state(client: &mut Client) -> String {
    client
        .query_one(
            "SELECT concat_ws(' ', (SELECT count(*) FROM jq_jobs), (SELECT sum(lease_token) FROM jq_jobs),
                    (SELECT md5(string_agg(j::text, '' ORDER BY id)) FROM jq_jobs j),
                    (SELECT count(*) FROM jq_job_events), (SELECT md5(string_agg(q::text, '' ORDER BY queue_name)) FROM jq_queues q),
                    (SELECT md5(string_agg(g::text, '' ORDER BY g::text)) FROM jq_grants g),
                    (SELECT md5(string_agg(s::text, '' ORDER BY name)) FROM jq_schedule_specs s))",
            &[],
        )
        .unwrap()
        .get(0)
}

#[test]
fn every_argument_is_refused_cleanly_or_accepted() {
    let cluster = Cluster::start();
    let mut c = cluster.connect();
    c.batch_execute("SELECT jq_enqueue('fz', '{}')").unwrap();
    let row = c.query_one("SELECT id, lease_token FROM jq_claim('fz', 'w', '1 hour')", &[]).unwrap();
    let (job, token): (i64, i64) = (row.get(0), row.get(1));

    let mut wrong = Vec::new();
    let mut refused = 0;
    for (function, arguments) in functions(job, token) {
        for (i, (argument, _, values)) in arguments.iter().enumerate() {
            for value in values.iter() {
                let call = arguments
                    .iter()
                    .enumerate()
                    .map(|(j, (name, valid, _))| {
                        format!("{name} => {}", if i == j { value.to_string() } else { valid.clone() })
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                let sql = format!("SELECT * FROM {function}({call})");
                let before = state(&mut c);
                let Err(error) = c.batch_execute(&sql) else { continue };
                refused += 1;
                let db = error.as_db_error();
                let code = db.map(|e| e.code().code()).unwrap_or("none");
                let message = db.map(|e| e.message()).unwrap_or("");
                let short = if sql.len() > 160 { format!("{}...", &sql[..160]) } else { sql.clone() };
                if !matches!(code, "22004" | "22023" | "42501") {
                    wrong.push(format!("{short}: SQLSTATE {code}: {message}"));
                } else if code != "42501" && !message.contains(argument) {
                    wrong.push(format!("{short}: the message does not name {argument}: {message}"));
                } else if state(&mut c) != before {
                    wrong.push(format!("{short}: refused, but something was written"));
                }
            }
        }
    }
    assert!(refused > 50, "the fuzz pass refused only {refused} calls: it is not trying bad values");
    assert!(wrong.is_empty(), "{} calls went wrong:\n{}", wrong.len(), wrong.join("\n"));
}
