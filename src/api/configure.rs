//! Queue settings: `jq_configure`, the one way a queue's manager changes them, and the check that
//! keeps every interval setting from stopping its queue.

use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::{spi, JsonB};

use crate::db::{self, payload::Payload, refusing_bad_values};
use crate::error::{invalid_argument, null_argument};
use crate::rights::{self, Privilege};
use crate::{guc, input};

const ENSURE_ROW: &str = include_str!("../../sql/queries/configure_row.sql");
const CONFIGURE: &str = include_str!("../../sql/queries/configure.sql");
const ENSURE_KEY_ROW: &str = include_str!("../../sql/queries/configure_key_row.sql");
const CONFIGURE_KEY: &str = include_str!("../../sql/queries/configure_key.sql");
const SETTINGS_KEYS: &str = include_str!("../../sql/queries/settings_keys.sql");

/// The settings jq_configure takes: the columns of jq_queues but its key.
const SETTINGS: [&str; 19] = [
    "default_lease",
    "max_attempts",
    "backoff_base",
    "backoff_cap",
    "max_runtime",
    "paused",
    "concurrency_limit",
    "key_concurrency_limit",
    "rate_limit",
    "rate_period",
    "key_rate_limit",
    "key_rate_period",
    "starvation_limit",
    "retention",
    "notify",
    "warn_claimable_age",
    "warn_expiring_leases",
    "warn_dead_age",
    "keep_succeeded",
];

/// Changes the settings named in `settings` (a JSON object: `{"max_attempts": 5, "paused": true,
/// "concurrency_limit": null}`) and returns all of the queue's settings afterwards; `'{}'` only
/// reads them. Needs `manage` on the queue. A bad value is refused with 22023 naming the setting,
/// and then nothing changes.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_configure(queue_name: Option<&str>, settings: Option<Payload>) -> spi::Result<JsonB> {
    let queue_name = input::queue_name(queue_name);
    let settings = settings_object(settings, &SETTINGS);
    rights::require(queue_name, Privilege::Manage);
    let max_lease = guc::MAX_LEASE_SECONDS.get();
    let changed = rights::as_owner(|| {
        refusing_bad_values(|| {
            db::connect(|db| {
                db.rows::<()>(ENSURE_ROW, &[queue_name.into()])?;
                let changed = db.rows::<(JsonB, Option<f64>)>(CONFIGURE, &[queue_name.into(), settings.into()])?;
                let (settings, default_lease) = changed.into_iter().next().expect("the queue's row exists");
                // Raised inside the subtransaction, so that the change is undone with it.
                if default_lease.unwrap_or(0.0) > f64::from(max_lease) {
                    invalid_argument(
                        "default_lease",
                        format_args!("must not exceed pg_jobqueue.max_lease ({max_lease} s)"),
                    );
                }
                Ok(settings)
            })
        })
    });
    changed.map_err(|message| invalid_argument("settings", format_args!("refused: {message}")))
}

/// The settings jq_configure_key takes: those of jq_key_settings but its key.
const KEY_SETTINGS: [&str; 2] = ["concurrency_limit", "weight"];

/// Changes the settings of one concurrency key of the queue named in `settings` (`{"weight": 3}`,
/// `{"concurrency_limit": 1}`; a null restores the default: the queue's key_concurrency_limit,
/// weight 1) and returns all of them afterwards (guide, "Flow control"). Needs `manage` on the
/// queue; a bad value is refused with 22023 naming the setting, and then nothing changes.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_configure_key(
    queue_name: Option<&str>,
    concurrency_key: Option<&str>,
    settings: Option<Payload>,
) -> spi::Result<JsonB> {
    let queue_name = input::queue_name(queue_name);
    let key = input::concurrency_key(concurrency_key).unwrap_or_else(|| null_argument("concurrency_key"));
    let settings = settings_object(settings, &KEY_SETTINGS);
    rights::require(queue_name, Privilege::Manage);
    let changed = rights::as_owner(|| {
        refusing_bad_values(|| {
            db::connect(|db| {
                db.rows::<()>(ENSURE_KEY_ROW, &[queue_name.into(), key.into()])?;
                let changed = db.first::<JsonB>(CONFIGURE_KEY, &[queue_name.into(), key.into(), settings.into()])?;
                Ok(changed.expect("the key's row exists"))
            })
        })
    });
    changed.map_err(|message| invalid_argument("settings", format_args!("refused: {message}")))
}

/// `settings` as a JSON object of known setting names, or the argument's error. The server reads
/// its type and keys, so a value nested however deep is refused like any other, with 22023.
fn settings_object(settings: Option<Payload>, known: &[&str]) -> Payload {
    let settings = settings.unwrap_or_else(|| null_argument("settings"));
    let shape = db::read_only_rows::<(String, Option<Vec<String>>)>(SETTINGS_KEYS, &[settings.into()])
        .expect("jsonb_typeof reads any jsonb value");
    let Some((_, Some(keys))) = shape.into_iter().next() else {
        invalid_argument("settings", "must be a JSON object of setting names and values");
    };
    if let Some(unknown) = keys.iter().find(|key| !known.contains(&key.as_str())) {
        invalid_argument(
            "settings",
            format_args!("has an unknown setting \"{unknown}\"; the settings are {}", known.join(", ")),
        );
    }
    settings
}

extension_sql_file!(
    "../../sql/schema/constraints.sql",
    name = "settings",
    requires = [jq_setting_interval_ok, jq_live_job_consistent, jq_table_changed]
);

/// Whether an interval setting adds what it says and stays in range: no part (months, days, time)
/// negative, and at most 100 years in all. The check constraints of jq_queues call it.
#[pg_extern(immutable, parallel_safe, strict)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_setting_interval_ok(value: Interval) -> bool {
    // interval '100 years', as interval comparison counts it (1,200 months of 30 days).
    const CENTURY_MICROS: i128 = 1_200 * 30 * 86_400 * 1_000_000;
    value.months() >= 0 && value.days() >= 0 && value.micros() >= 0 && value.as_micros() <= CENTURY_MICROS
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn configure_changes_the_named_settings_and_keeps_the_others() {
        let settings =
            one::<pgrx::JsonB>("SELECT jq_configure('cfg', '{\"max_attempts\": 3, \"concurrency_limit\": 2}')").0;
        assert_eq!(settings["max_attempts"], 3);
        assert_eq!(settings["concurrency_limit"], 2);
        assert_eq!(settings["default_lease"], "00:01:00", "the others keep their defaults");
        let settings = one::<pgrx::JsonB>("SELECT jq_configure('cfg', '{\"concurrency_limit\": null}')").0;
        assert!(settings["concurrency_limit"].is_null());
        assert_eq!(settings["max_attempts"], 3, "a setting not named is kept");
        assert_eq!(one::<i32>("SELECT max_attempts FROM jq_queues WHERE queue_name = 'cfg'"), 3);
    }
}

/// Every fallback the statements write for a queue without a row of jq_queues equals the column's
/// default in the table: the two are written apart, and this keeps them one value.
#[cfg(test)]
mod fallbacks {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    fn sql_files(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                sql_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "sql") {
                let text = std::fs::read_to_string(&path).unwrap();
                // Without comments, on one line.
                let code: Vec<&str> = text.lines().map(|l| l.split("--").next().unwrap()).collect();
                out.push((path.display().to_string(), code.join(" ").split_whitespace().collect::<Vec<_>>().join(" ")));
            }
        }
    }

    /// The identifier at the start of `text`.
    fn ident(text: &str) -> &str {
        &text[..text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(text.len())]
    }

    /// A value as the table's DEFAULT writes it: `interval '60 seconds'` is `'60 seconds'`.
    fn literal(value: &str) -> String {
        value.trim().strip_prefix("interval ").unwrap_or(value.trim()).to_string()
    }

    /// The top-level arguments of the call whose text starts right after its `(`.
    fn arguments(text: &str) -> Vec<&str> {
        let (mut depth, mut start, mut out) = (0, 0, Vec::new());
        for (i, c) in text.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    out.push(text[start..i].trim());
                    return out;
                }
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    out.push(text[start..i].trim());
                    start = i + 1;
                }
                _ => {}
            }
        }
        out
    }

    /// The setting an argument reads: `q.<setting>` or `(SELECT q.<setting> FROM jq_queues ...)`.
    fn setting(argument: &str) -> Option<&str> {
        let rest = argument.strip_prefix("(SELECT q.").or_else(|| argument.strip_prefix("q."))?;
        let name = ident(rest);
        (argument.starts_with("q.") && name.len() == rest.len() || rest[name.len()..].starts_with(" FROM jq_queues "))
            .then_some(name)
    }

    /// (setting, value, file) for each `THEN <value> ELSE q.<setting>` and each
    /// `coalesce(.., <setting>, <value>)` whose value is a constant.
    fn in_statements() -> Vec<(String, String, String)> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("sql");
        let mut files = Vec::new();
        sql_files(&root.join("queries"), &mut files);
        sql_files(&root.join("schema"), &mut files);
        let constant = |value: &str| {
            value.starts_with(|c: char| c.is_ascii_digit() || c == '\'')
                || ["interval '", "true", "false"].iter().any(|start| value.starts_with(start))
        };
        let mut found = Vec::new();
        for (file, sql) in &files {
            for (at, _) in sql.match_indices(" ELSE q.") {
                let then = sql[..at].rfind("THEN ").unwrap();
                let value = &sql[then + 5..at];
                if constant(value) {
                    found.push((ident(&sql[at + 8..]).to_string(), literal(value), file.clone()));
                }
            }
            for (at, _) in sql.match_indices("coalesce(").chain(sql.match_indices("COALESCE(")) {
                let args = arguments(&sql[at + 9..]);
                let Some((last, before)) = args.split_last() else { continue };
                if let (Some(name), true) = (before.iter().find_map(|a| setting(a)), constant(last)) {
                    found.push((name.to_string(), literal(last), file.clone()));
                }
            }
        }
        found
    }

    /// Each column of jq_queues with its DEFAULT, from the schema.
    fn table_defaults() -> BTreeMap<String, String> {
        let schema = include_str!("../../sql/schema/tables.sql");
        let table = &schema[schema.find("CREATE TABLE jq_queues (").unwrap()..];
        let table = &table[..table.find("\n);").unwrap()];
        table
            .lines()
            .filter_map(|line| {
                let line = line.split("--").next().unwrap().trim();
                let default = &line[line.find(" DEFAULT ")? + 9..];
                Some((ident(line).to_string(), default.trim_end_matches(',').trim().to_string()))
            })
            .collect()
    }

    #[test]
    fn the_statements_fallbacks_are_the_tables_defaults() {
        let defaults = table_defaults();
        // A setting without a DEFAULT is NULL for a queue without a row, and a statement's
        // fallback for it says what NULL means (no limit), which is not a default.
        let found: Vec<_> =
            in_statements().into_iter().filter(|(setting, ..)| defaults.contains_key(setting)).collect();
        for (setting, value, file) in &found {
            assert_eq!(Some(value), defaults.get(setting), "{file}: {setting} falls back to {value}");
        }
        // The fallbacks this test must find, so that a change of how they are written cannot hide one.
        let seen: BTreeSet<&str> = found.iter().map(|(setting, ..)| setting.as_str()).collect();
        let expected = [
            "backoff_base",
            "backoff_cap",
            "default_lease",
            "keep_succeeded",
            "max_attempts",
            "paused",
            "retention",
            "starvation_limit",
            "warn_claimable_age",
            "warn_dead_age",
            "warn_expiring_leases",
        ];
        assert_eq!(seen, expected.into_iter().collect(), "{found:?}");
    }
}
