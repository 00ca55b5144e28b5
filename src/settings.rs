//! Queue settings: `jq_configure`, the one way a queue's manager changes them, and the check that
//! keeps every interval setting from stopping its queue.

use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::{spi, JsonB, PgSqlErrorCode};

use crate::error::{invalid_argument, null_argument};
use crate::rights::{self, Privilege};
use crate::spi_util::in_subtransaction;
use crate::{guc, input, plans};

const ENSURE_ROW: &str = include_str!("../sql/queries/configure_row.sql");
const CONFIGURE: &str = include_str!("../sql/queries/configure.sql");

/// The settings jq_configure takes: the columns of jq_queues but its key.
const SETTINGS: [&str; 13] = [
    "default_lease",
    "max_attempts",
    "backoff_base",
    "backoff_cap",
    "max_runtime",
    "paused",
    "concurrency_limit",
    "starvation_limit",
    "retention",
    "notify",
    "warn_claimable_age",
    "warn_expiring_leases",
    "warn_dead_age",
];

/// Changes the settings named in `settings` (a JSON object: `{"max_attempts": 5, "paused": true,
/// "concurrency_limit": null}`) and returns all of the queue's settings afterwards; `'{}'` only
/// reads them. Needs `manage` on the queue. A bad value is refused with 22023 naming the setting,
/// and then nothing changes.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_configure(queue_name: Option<&str>, settings: Option<JsonB>) -> spi::Result<JsonB> {
    let queue_name = input::queue_name(queue_name);
    let settings = settings.unwrap_or_else(|| null_argument("settings"));
    let Some(object) = settings.0.as_object() else {
        invalid_argument("settings", "must be a JSON object of setting names and values");
    };
    if let Some(unknown) = object.keys().find(|key| !SETTINGS.contains(&key.as_str())) {
        invalid_argument("settings", format_args!("has an unknown setting \"{unknown}\"; the settings are {}", SETTINGS.join(", ")));
    }
    rights::require(queue_name, Privilege::Manage);
    let max_lease = guc::MAX_LEASE_SECONDS.get();
    let changed = rights::as_owner(|| {
        in_subtransaction(|| {
            Spi::connect_mut(|client| {
                plans::run(client, ENSURE_ROW, &[queue_name.into()])?;
                let row = plans::run(client, CONFIGURE, &[queue_name.into(), JsonB(settings.0.clone()).into()])?.first();
                // Raised inside the subtransaction, so that the change is undone with it.
                if row.get::<f64>(2)?.unwrap_or(0.0) > f64::from(max_lease) {
                    ereport!(ERROR, PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
                        format!("default_lease must not exceed pg_jobqueue.max_lease ({max_lease} s)"));
                }
                Ok(row.get::<JsonB>(1)?.expect("to_jsonb of a row is not NULL"))
            })
        })
    });
    changed.map_err(|message| invalid_argument("settings", format_args!("refused: {message}")))
}

extension_sql_file!("../sql/settings.sql", name = "settings", requires = [jq_setting_interval_ok]);

/// Whether an interval setting adds what it says and stays in range: no part (months, days, time)
/// negative, and at most 100 years in all. The check constraints of jq_queues call it.
#[pg_extern(immutable, parallel_safe, strict)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_setting_interval_ok(value: Interval) -> bool {
    // interval '100 years', as interval comparison counts it (1,200 months of 30 days).
    const CENTURY_MICROS: i128 = 1_200 * 30 * 86_400 * 1_000_000;
    value.months() >= 0 && value.days() >= 0 && value.micros() >= 0 && value.as_micros() <= CENTURY_MICROS
}
