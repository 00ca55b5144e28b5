//! Argument checks shared by the SQL functions. They run before any statement, so a call that is
//! refused writes nothing. NULL raises 22004, a bad value 22023; the message names the argument.

use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::IntoDatum;

use crate::db::payload::Payload;
use crate::error::{invalid_argument, null_argument};
use crate::guc;

const MAX_QUEUE_NAME_CHARS: usize = 60;
const MAX_WORKER_CHARS: usize = 200;
const MAX_ERROR_CODE_CHARS: usize = 64;
/// Dedup and ordering keys are index keys: 256 characters of at most 4 bytes stay well within a
/// btree entry's limit (2,704 bytes), where a longer key would fail with 54000 at insert.
const MAX_KEY_CHARS: usize = 256;
/// An error message is history, not a request to refuse: a longer one is cut, never the failure lost.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 2000;
const MICROS_PER_SECOND: i128 = 1_000_000;
/// A listing returns a page, not a table: a dashboard's or a person's, who asks for the next one.
const MAX_LISTED_ROWS: i32 = 1000;

pub fn queue_name(value: Option<&str>) -> &str {
    let name = required_text("queue_name", value, MAX_QUEUE_NAME_CHARS);
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')) {
        invalid_argument("queue_name", "may contain only letters, digits and the characters _ - . :");
    }
    name
}

pub fn worker(value: Option<&str>) -> &str {
    required_text("worker", value, MAX_WORKER_CHARS)
}

pub fn job_id(value: Option<i64>) -> i64 {
    value.unwrap_or_else(|| null_argument("job_id"))
}

pub fn lease_token(value: Option<i64>) -> i64 {
    value.unwrap_or_else(|| null_argument("lease_token"))
}

/// A lease length (`lease`) or extension (`extend`): NULL stays NULL (the default applies);
/// otherwise what it adds to `now` is positive and within `pg_jobqueue.max_lease`.
pub fn lease_length(argument: &str, value: Option<Interval>, now: TimestampWithTimeZone) -> Option<Interval> {
    let length = value?;
    let added = added_micros(argument, length, now);
    if added <= 0 {
        invalid_argument(argument, "must be greater than zero");
    }
    let max_seconds = guc::MAX_LEASE_SECONDS.get();
    if added > i128::from(max_seconds) * MICROS_PER_SECOND {
        invalid_argument(argument, format_args!("must not exceed pg_jobqueue.max_lease ({max_seconds} s)"));
    }
    Some(length)
}

/// A claim's `wait`: NULL or zero means none. A negative wait, or one over `pg_jobqueue.max_wait`,
/// is refused.
pub fn wait(value: Option<Interval>, now: TimestampWithTimeZone) -> Option<std::time::Duration> {
    let micros = added_micros("wait", value?, now);
    if micros < 0 {
        invalid_argument("wait", "must not be negative");
    }
    let max_seconds = guc::MAX_WAIT_SECONDS.get();
    if micros > i128::from(max_seconds) * MICROS_PER_SECOND {
        invalid_argument("wait", format_args!("must not exceed pg_jobqueue.max_wait ({max_seconds} s)"));
    }
    (micros > 0).then(|| std::time::Duration::from_micros(micros as u64))
}

/// jq_await's `wait`: present, not negative, within `pg_jobqueue.max_wait`; zero looks once.
pub fn await_wait(value: Option<Interval>, now: TimestampWithTimeZone) -> std::time::Duration {
    let value = value.unwrap_or_else(|| null_argument("wait"));
    wait(Some(value), now).unwrap_or_default()
}

/// An interval as interval comparison measures it: a month is 30 days, a day 24 hours.
pub fn nominal_micros(value: Interval) -> i128 {
    value.as_micros()
}

/// What adding `value` to `now` actually adds, in microseconds: months and days have the length of
/// the calendar and time zone at `now`, so `interval '1 mon -30 days 23:59:59'`, which compares as
/// less than a day, can add two. An interval whose parts are each beyond a century (so that the
/// addition itself could leave the timestamp range) is refused before it is added.
fn added_micros(argument: &str, value: Interval, now: TimestampWithTimeZone) -> i128 {
    const CENTURY_DAYS: i64 = 36_525;
    let months_ok = i64::from(value.months()).abs() <= 1200;
    let days_ok = i64::from(value.days()).abs() <= CENTURY_DAYS;
    let micros_ok = value.micros().unsigned_abs() <= (CENTURY_DAYS * 86_400 * 1_000_000) as u64;
    if !(months_ok && days_ok && micros_ok) {
        invalid_argument(argument, "is out of range: no part of it may exceed 100 years");
    }
    // SAFETY: timestamptz_pl_interval takes these two datums; both parts were bounded above, so it
    // errors (out of range) rather than misbehaves.
    let end: TimestampWithTimeZone = unsafe {
        pgrx::direct_function_call(pg_sys::timestamptz_pl_interval, &[now.into_datum(), value.into_datum()])
            .expect("timestamptz + interval is not NULL")
    };
    i128::from(pg_sys::TimestampTz::from(end)) - i128::from(pg_sys::TimestampTz::from(now))
}

pub fn batch_size(value: Option<i32>) -> i32 {
    let size = value.unwrap_or_else(|| null_argument("batch_size"));
    let max = guc::MAX_BATCH_SIZE.get();
    if size < 1 {
        invalid_argument("batch_size", "must be at least 1");
    }
    if size > max {
        invalid_argument("batch_size", format_args!("must not exceed pg_jobqueue.max_batch_size ({max})"));
    }
    size
}

/// The ids and tokens of a batch completion: both present, of equal length, within
/// `pg_jobqueue.max_batch_size`, and without NULL elements.
pub fn job_batch(job_ids: Option<Vec<Option<i64>>>, lease_tokens: Option<Vec<Option<i64>>>) -> (Vec<i64>, Vec<i64>) {
    let job_ids = job_ids.unwrap_or_else(|| null_argument("job_ids"));
    let lease_tokens = lease_tokens.unwrap_or_else(|| null_argument("lease_tokens"));
    if job_ids.len() != lease_tokens.len() {
        invalid_argument(
            "lease_tokens",
            format_args!("has {} elements, job_ids has {}: give one token per job", lease_tokens.len(), job_ids.len()),
        );
    }
    let max = guc::MAX_BATCH_SIZE.get();
    if job_ids.len() > max as usize {
        invalid_argument(
            "job_ids",
            format_args!("must not have more than pg_jobqueue.max_batch_size ({max}) elements"),
        );
    }
    (no_null_elements("job_ids", job_ids), no_null_elements("lease_tokens", lease_tokens))
}

/// A batch completion's `results`: NULL (none), or one per job (a NULL element: that job has none),
/// each within `pg_jobqueue.max_result_bytes`. With results, no job may be given twice: it is
/// completed once, and which of its results it kept would be chance.
pub fn results(value: Option<Vec<Option<Payload>>>, job_ids: &[i64]) -> Option<Vec<Option<Payload>>> {
    let results = value?;
    if results.len() != job_ids.len() {
        invalid_argument(
            "results",
            format_args!(
                "has {} elements, job_ids has {}: give one result (or NULL) per job",
                results.len(),
                job_ids.len()
            ),
        );
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(id) = job_ids.iter().find(|id| !seen.insert(**id)) {
        invalid_argument("job_ids", format_args!("gives job {id} twice, which results do not allow"));
    }
    for (i, r) in results.iter().enumerate() {
        if let Some(r) = r {
            within(&format!("results[{}]", i + 1), r, "pg_jobqueue.max_result_bytes", guc::MAX_RESULT_BYTES.get());
        }
    }
    Some(results)
}

fn no_null_elements(argument: &str, values: Vec<Option<i64>>) -> Vec<i64> {
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| v.unwrap_or_else(|| null_argument(&format!("{argument}[{}]", i + 1))))
        .collect()
}

pub fn max_attempts(value: Option<i32>) -> Option<i32> {
    if let Some(n) = value {
        if n < 1 {
            invalid_argument("max_attempts", "must be at least 1");
        }
    }
    value
}

pub fn priority(value: Option<i32>) -> i32 {
    value.unwrap_or_else(|| null_argument("priority"))
}

pub fn run_at(value: Option<TimestampWithTimeZone>) -> Option<TimestampWithTimeZone> {
    if let Some(at) = value {
        if !at.is_finite() {
            invalid_argument("run_at", "must be a finite time");
        }
    }
    value
}

/// A job's `expires_at`: NULL (never), or a finite time after its `run_at`, before which it could
/// never be claimed. A time already past is taken: no claim takes the job, and the next expiry
/// sweep cancels it.
pub fn expires_at(
    value: Option<TimestampWithTimeZone>,
    run_at: Option<TimestampWithTimeZone>,
) -> Option<TimestampWithTimeZone> {
    let at = value?;
    if !at.is_finite() {
        invalid_argument("expires_at", "must be a finite time");
    }
    if run_at.is_some_and(|run_at| pg_sys::TimestampTz::from(at) <= pg_sys::TimestampTz::from(run_at)) {
        invalid_argument("expires_at", "must be later than run_at");
    }
    Some(at)
}

pub fn payload(argument: &str, value: Option<Payload>) -> Payload {
    let payload = value.unwrap_or_else(|| null_argument(argument));
    within(argument, &payload, "pg_jobqueue.max_payload_bytes", guc::MAX_PAYLOAD_BYTES.get());
    payload
}

/// A completion's `result`: NULL (none), or a jsonb value within `pg_jobqueue.max_result_bytes`.
pub fn result(argument: &str, value: Option<Payload>) -> Option<Payload> {
    value.inspect(|result| within(argument, result, "pg_jobqueue.max_result_bytes", guc::MAX_RESULT_BYTES.get()))
}

/// A progress report: present, and within `pg_jobqueue.max_progress_bytes`.
pub fn progress(value: Option<Payload>) -> Payload {
    let progress = value.unwrap_or_else(|| null_argument("progress"));
    within("progress", &progress, "pg_jobqueue.max_progress_bytes", guc::MAX_PROGRESS_BYTES.get());
    progress
}

fn within(argument: &str, value: &Payload, setting: &str, max: i32) {
    let size = value.size_bytes();
    if size > max as usize {
        invalid_argument(argument, format_args!("is {size} bytes, more than {setting} ({max})"));
    }
}

pub fn error_code(value: Option<&str>) -> &str {
    required_text("error_code", value, MAX_ERROR_CODE_CHARS)
}

/// The message as stored: at most MAX_ERROR_MESSAGE_CHARS characters.
pub fn error_message(value: Option<&str>) -> Option<&str> {
    value.map(|message| match message.char_indices().nth(MAX_ERROR_MESSAGE_CHARS) {
        Some((cut, _)) => &message[..cut],
        None => message,
    })
}

pub fn retryable(value: Option<bool>) -> bool {
    value.unwrap_or_else(|| null_argument("retryable"))
}

/// A failure's `retry_in`: NULL means backoff; otherwise a `delay` (see there).
pub fn retry_in(value: Option<Interval>, now: TimestampWithTimeZone) -> Option<Interval> {
    value.map(|delay| self::delay("retry_in", delay, now))
}

/// A snooze's `delay`: present, and a `delay` (see there).
pub fn snooze_delay(value: Option<Interval>, now: TimestampWithTimeZone) -> Interval {
    delay("delay", value.unwrap_or_else(|| null_argument("delay")), now)
}

/// A delay before a job is claimable again: what it adds to `now` is not negative and within
/// `pg_jobqueue.max_retry_delay`.
fn delay(argument: &str, delay: Interval, now: TimestampWithTimeZone) -> Interval {
    let added = added_micros(argument, delay, now);
    if added < 0 {
        invalid_argument(argument, "must not be negative");
    }
    let max_seconds = guc::MAX_RETRY_DELAY_SECONDS.get();
    if added > i128::from(max_seconds) * MICROS_PER_SECOND {
        invalid_argument(argument, format_args!("must not exceed pg_jobqueue.max_retry_delay ({max_seconds} s)"));
    }
    delay
}

/// A dedup or ordering key: NULL (none), or a text short enough for its index.
pub fn key<'a>(argument: &str, value: Option<&'a str>) -> Option<&'a str> {
    if value.is_some_and(|key| key.chars().count() > MAX_KEY_CHARS) {
        invalid_argument(argument, format_args!("must be at most {MAX_KEY_CHARS} characters"));
    }
    value
}

/// A concurrency key: NULL (none), or a non-empty text short enough for its index. Never empty:
/// the key rotation starts after the empty text (claim_keys.sql).
pub fn concurrency_key(value: Option<&str>) -> Option<&str> {
    if value == Some("") {
        invalid_argument("concurrency_key", "must not be empty");
    }
    key("concurrency_key", value)
}

/// A batch enqueue's payloads: present, within `pg_jobqueue.max_batch_size`, none NULL or too large.
pub fn payloads(value: Option<Vec<Option<Payload>>>) -> Vec<Payload> {
    let payloads = value.unwrap_or_else(|| null_argument("payloads"));
    let max = guc::MAX_BATCH_SIZE.get();
    if payloads.len() > max as usize {
        invalid_argument(
            "payloads",
            format_args!("must not have more than pg_jobqueue.max_batch_size ({max}) elements"),
        );
    }
    payloads.into_iter().enumerate().map(|(i, p)| payload(&format!("payloads[{}]", i + 1), p)).collect()
}

pub fn max_jobs(value: Option<i32>) -> i32 {
    let n = value.unwrap_or_else(|| null_argument("max_jobs"));
    if n < 1 {
        invalid_argument("max_jobs", "must be at least 1");
    }
    n
}

/// A listing's page: `max_rows` from 1 to `MAX_LISTED_ROWS`, after `skip_rows` rows (not negative).
pub fn page(max_rows: Option<i32>, skip_rows: Option<i32>) -> (i32, i32) {
    let rows = max_rows.unwrap_or_else(|| null_argument("max_rows"));
    if !(1..=MAX_LISTED_ROWS).contains(&rows) {
        invalid_argument("max_rows", format_args!("must be between 1 and {MAX_LISTED_ROWS}"));
    }
    let skip = skip_rows.unwrap_or_else(|| null_argument("skip_rows"));
    if skip < 0 {
        invalid_argument("skip_rows", "must not be negative");
    }
    (rows, skip)
}

/// An age to filter by (`older_than`): NULL (any), or the time `now` was that long ago, for an age
/// that is not negative.
pub fn older_than(value: Option<Interval>, now: TimestampWithTimeZone) -> Option<TimestampWithTimeZone> {
    let age = value?;
    if added_micros("older_than", age, now) < 0 {
        invalid_argument("older_than", "must not be negative");
    }
    // SAFETY: timestamptz_mi_interval takes these two datums; added_micros bounded the interval,
    // so it errors (out of range) rather than misbehaves.
    Some(unsafe {
        pgrx::direct_function_call(pg_sys::timestamptz_mi_interval, &[now.into_datum(), age.into_datum()])
            .expect("timestamptz - interval is not NULL")
    })
}

/// A text argument that must be present, not empty, and at most `max_chars` characters long.
fn required_text<'a>(argument: &str, value: Option<&'a str>, max_chars: usize) -> &'a str {
    let text = value.unwrap_or_else(|| null_argument(argument));
    if text.is_empty() {
        invalid_argument(argument, "must not be empty");
    }
    if text.chars().count() > max_chars {
        invalid_argument(argument, format_args!("must be at most {max_chars} characters"));
    }
    text
}

/// An enqueue's `depends_on` (guide, "Workflows"): NULL or empty for none; otherwise no NULL
/// element, no id twice, and at most `pg_jobqueue.max_batch_size` ids.
pub fn depends_on(value: Option<Vec<Option<i64>>>) -> Option<Vec<i64>> {
    let ids = value.filter(|ids| !ids.is_empty())?;
    let max = guc::MAX_BATCH_SIZE.get();
    if ids.len() > max as usize {
        invalid_argument(
            "depends_on",
            format_args!("must not have more than pg_jobqueue.max_batch_size ({max}) elements"),
        );
    }
    let mut seen = std::collections::HashSet::new();
    let ids: Vec<i64> = ids
        .into_iter()
        .enumerate()
        .map(|(i, id)| id.unwrap_or_else(|| invalid_argument("depends_on", format_args!("has a NULL at {}", i + 1))))
        .collect();
    if let Some(id) = ids.iter().find(|id| !seen.insert(**id)) {
        invalid_argument("depends_on", format_args!("names job {id} twice"));
    }
    Some(ids)
}

/// 22023 for an array argument of more than one dimension: each is a list, and PostgreSQL would
/// hand over `ARRAY[[1, 2], [3, 4]]` as the flat list of its elements. `position` is the
/// argument's place in the call (from 0), defaults included.
pub fn one_dimension(fcinfo: pg_sys::FunctionCallInfo, position: usize, argument: &str) {
    // SAFETY: PostgreSQL's call information for this call, whose arguments (defaults filled in)
    // number `nargs`; a non-NULL array argument is an array datum, detoasted before its header is
    // read.
    let dimensions = unsafe {
        let args = (*fcinfo).args.as_slice((*fcinfo).nargs as usize);
        match args.get(position) {
            Some(arg) if !arg.isnull => {
                let array = pg_sys::pg_detoast_datum(arg.value.cast_mut_ptr()).cast::<pg_sys::ArrayType>();
                (*array).ndim
            }
            _ => 0,
        }
    };
    if dimensions > 1 {
        invalid_argument(argument, format_args!("must be a list of one dimension, not {dimensions}"));
    }
}
