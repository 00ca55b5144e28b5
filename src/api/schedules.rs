//! Schedules (guide, "Schedules"): recurring jobs kept in the database. jq_schedule creates or
//! replaces one; jq_unschedule, jq_pause_schedule and jq_resume_schedule drop, pause and resume it;
//! jq_cron_next previews an expression; the view jq_schedules lists them. Each needs `manage` on
//! the schedule's queue (jq_cron_next, which reads nothing, any right).
//!
//! Ticks are made by `tick`, which jq_reap() and the background worker run (see `reap`): for each
//! due schedule, locked, it enqueues the jobs its catch-up policy asks for and moves its next run
//! on, in the pass's transaction, so that each tick enqueues once however many tickers race. A
//! schedule that fails (its options no longer pass, a trigger refuses its job) is left as it is,
//! logged once per session, and tried again at the next pass: one schedule never stops the others.
//!
//! Times: a cron expression is matched against local time in the schedule's zone (`cron`), and each
//! matching local time becomes an instant through the server's time zone data, as `timestamp AT
//! TIME ZONE zone` does. A local time that a change to summer time skips becomes the instant as
//! much later as the clocks jumped (02:30 becomes 03:30), which is one run; one that the change
//! back repeats is made once, at its first occurrence (`next_tick`).

use std::cell::RefCell;
use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;

use super::enqueue::{self, NewJob};
use crate::cron::{Civil, Cron};
use crate::db::{self, clock, in_subtransaction, payload::Payload};
use crate::error::{invalid_argument, null_argument};
use crate::input;
use crate::rights::{self, Privilege};

const GET: &str = include_str!("../../sql/queries/schedule_get.sql");
const QUEUE_OF: &str = include_str!("../../sql/queries/schedule_queue.sql");
const MANAGERS: [Privilege; 1] = [Privilege::Manage];
const PUT: &str = include_str!("../../sql/queries/schedule_put.sql");
const DROP: &str = include_str!("../../sql/queries/schedule_drop.sql");
const PAUSE: &str = include_str!("../../sql/queries/schedule_pause.sql");
const DUE: &str = include_str!("../../sql/queries/schedule_due.sql");
const FIRED: &str = include_str!("../../sql/queries/schedule_fired.sql");

const MAX_NAME_CHARS: usize = 100;
/// A tick found more than this late counts as missed (catch-up `skip` drops it).
const LATE_AFTER: Duration = Duration::from_secs(60);
/// At most this many schedules per tick pass; the rest wait for the next pass.
const MOST_PER_PASS: i32 = 1000;
/// A pass that counts more missed ticks than this for one schedule (every second, for a day and
/// more) starts counting again close to now (`due_ticks`).
const MOST_TICKS_COUNTED: usize = 100_000;

thread_local! {
    /// Schedules whose failure this session has logged. A backend is one thread.
    static LOGGED: RefCell<BTreeSet<String>> = const { RefCell::new(BTreeSet::new()) };
}

/// Creates the schedule `name`, or replaces every setting of it, and returns its next run: a job
/// into `queue_name` with `payload` and the job options, at each local time in `time_zone` that
/// `cron` matches. `catch_up` says what becomes of ticks missed while no ticker ran: `skip`
/// (dropped; a tick less than a minute late still runs), `once` (one job for the latest) or `each`
/// (one job for each of the latest `catch_up_limit`).
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
#[allow(clippy::too_many_arguments)]
fn jq_schedule(
    name: Option<&str>,
    cron: Option<&str>,
    queue_name: Option<&str>,
    payload: Option<Payload>,
    time_zone: default!(Option<&str>, "'UTC'"),
    catch_up: default!(Option<&str>, "'once'"),
    catch_up_limit: default!(Option<i32>, 10),
    priority: default!(Option<i32>, 0),
    max_attempts: default!(Option<i32>, "NULL"),
    dedup_key: default!(Option<&str>, "NULL"),
    ordering_key: default!(Option<&str>, "NULL"),
    concurrency_key: default!(Option<&str>, "NULL"),
    paused: default!(Option<bool>, false),
) -> spi::Result<TimestampWithTimeZone> {
    let now = clock::now();
    let name = schedule_name(name);
    let (cron_text, cron) = cron_argument(cron);
    let queue_name = input::queue_name(queue_name);
    let payload = input::payload("payload", payload);
    let time_zone = zone(time_zone);
    let catch_up = catch_up.unwrap_or_else(|| null_argument("catch_up"));
    if !["skip", "once", "each"].contains(&catch_up) {
        invalid_argument("catch_up", "must be one of skip, once, each");
    }
    let catch_up_limit = catch_up_limit.unwrap_or_else(|| null_argument("catch_up_limit"));
    if !(1..=1000).contains(&catch_up_limit) {
        invalid_argument("catch_up_limit", "must be between 1 and 1000");
    }
    let priority = input::priority(priority);
    let max_attempts = input::max_attempts(max_attempts);
    let dedup_key = input::key("dedup_key", dedup_key);
    let ordering_key = input::key("ordering_key", ordering_key);
    let concurrency_key = input::concurrency_key(concurrency_key);
    let paused = paused.unwrap_or_else(|| null_argument("paused"));
    rights::require(queue_name, Privilege::Manage);
    let next_run = next_tick(&cron, time_zone, now.into())
        .unwrap_or_else(|| invalid_argument("cron", "has no run left within the next five years"));
    let next_run = timestamp(next_run);
    // Replacing a schedule of another queue takes the right on that queue too, checked before the
    // row is locked, and again on the locked row, which a concurrent jq_schedule may have moved.
    if queue_of(name).is_some_and(|old_queue| !rights::may_use(&old_queue, &MANAGERS)) {
        crate::error::schedule_of_another_queue(name);
    }
    rights::as_owner(|| {
        db::connect(|db| loop {
            // Under the row's lock: the queue of the schedule replaced, whose right is checked.
            let old_queue = db.rows::<(String, String, String)>(GET, &[name.into()])?.pop().map(|(queue, ..)| queue);
            if old_queue.as_deref().is_some_and(|old_queue| !rights::may_use(old_queue, &MANAGERS)) {
                crate::error::schedule_of_another_queue(name);
            }
            let args = [
                name.into(),
                cron_text.into(),
                time_zone.into(),
                queue_name.into(),
                payload.into(),
                priority.into(),
                max_attempts.into(),
                dedup_key.into(),
                ordering_key.into(),
                concurrency_key.into(),
                catch_up.into(),
                catch_up_limit.into(),
                paused.into(),
                next_run.into(),
                now.into(),
                old_queue.into(),
            ];
            // No row: another transaction made a schedule of that name since GET found none; it
            // is locked now, and checked on the next turn.
            if !db.rows::<(i32,)>(PUT, &args)?.is_empty() {
                return Ok(next_run);
            }
        })
    })
}

/// Drops the schedule; false if there was none. Jobs it enqueued stay.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_unschedule(name: Option<&str>) -> spi::Result<bool> {
    let name = schedule_name(name);
    if !manageable(name) {
        return Ok(false);
    }
    rights::as_owner(|| {
        db::connect(|db| {
            let Some((queue_name, ..)) = db.rows::<(String, String, String)>(GET, &[name.into()])?.pop() else {
                return Ok(false);
            };
            if !rights::may_use(&queue_name, &MANAGERS) {
                return Ok(false);
            }
            Ok(!db.rows::<(String,)>(DROP, &[name.into()])?.is_empty())
        })
    })
}

/// Pauses the schedule: no tick is made until it is resumed. False if there is none or it was paused.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_pause_schedule(name: Option<&str>) -> spi::Result<bool> {
    set_paused(schedule_name(name), true)
}

/// Resumes the schedule from its next tick after now; the ticks that fell while it was paused are
/// not made up. False if there is none or it was not paused.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_resume_schedule(name: Option<&str>) -> spi::Result<bool> {
    set_paused(schedule_name(name), false)
}

/// Whether the caller may manage the schedule's queue, asked before its row is locked: false for no
/// schedule and for one of a queue the caller may not manage alike, so that a refusal tells nothing
/// of another queue's schedules; 42501 for a caller that manages no queue at all.
fn manageable(name: &str) -> bool {
    match queue_of(name) {
        Some(queue_name) => rights::may_use(&queue_name, &MANAGERS),
        None => {
            rights::require_somewhere(&MANAGERS);
            false
        }
    }
}

/// The schedule's queue, read without a lock.
fn queue_of(name: &str) -> Option<String> {
    rights::as_owner(|| db::connect(|db| db.first::<String>(QUEUE_OF, &[name.into()])))
        .expect("jq_schedule_specs is readable")
}

fn set_paused(name: &str, paused: bool) -> spi::Result<bool> {
    let now = clock::now();
    if !manageable(name) {
        return Ok(false);
    }
    rights::as_owner(|| {
        db::connect(|db| {
            let Some((queue_name, cron, time_zone)) = db.rows::<(String, String, String)>(GET, &[name.into()])?.pop()
            else {
                return Ok(false);
            };
            // A concurrent jq_schedule may have moved it to another queue since.
            if !rights::may_use(&queue_name, &MANAGERS) {
                return Ok(false);
            }
            // Only a resume moves the next run on. The row passed these checks when it was written;
            // one that no longer does (an operator's UPDATE) keeps its next run, and its tick
            // pass logs why.
            let next = (!paused)
                .then(|| Cron::parse(&cron).ok().and_then(|cron| next_tick(&cron, &time_zone, now.into())))
                .flatten()
                .map(timestamp);
            let args = [name.into(), paused.into(), next.into()];
            Ok(!db.rows::<(String,)>(PAUSE, &args)?.is_empty())
        })
    })
}

/// The next `count` runs of `cron` in `time_zone` after `after` (default: now), to check an
/// expression before scheduling it.
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_cron_next(
    cron: Option<&str>,
    time_zone: default!(Option<&str>, "'UTC'"),
    after: default!(Option<TimestampWithTimeZone>, "NULL"),
    count: default!(Option<i32>, 5),
) -> SetOfIterator<'static, TimestampWithTimeZone> {
    let (_, cron) = cron_argument(cron);
    let time_zone = zone(time_zone);
    let count = count.unwrap_or_else(|| null_argument("count"));
    if !(1..=1000).contains(&count) {
        invalid_argument("count", "must be between 1 and 1000");
    }
    let mut at: pg_sys::TimestampTz = after.unwrap_or_else(clock::now).into();
    // The calendar of years 1 to 9999, whose runs stay well inside the timestamp range.
    let (first, last) = (Civil::new(1, 1, 1, 0, 0, 0), Civil::new(9999, 12, 31, 23, 59, 59));
    if at < first.to_seconds() * MICROS || at > last.to_seconds() * MICROS {
        invalid_argument("after", "must be a time in the years 1 to 9999");
    }
    let mut runs = Vec::new();
    while runs.len() < count as usize {
        let Some(next) = next_tick(&cron, time_zone, at) else { break };
        runs.push(timestamp(next));
        at = next;
    }
    SetOfIterator::new(runs)
}

/// Makes the ticks that are due at `now`, of up to MOST_PER_PASS schedules; returns how many jobs
/// it enqueued. Runs with the owner's rights, inside a reaper pass or jq_reap().
pub fn tick(now: TimestampWithTimeZone) -> spi::Result<i32> {
    let due = db::rows_planned_per_call::<Due>(DUE, &[now.into(), MOST_PER_PASS.into()])?;
    let mut enqueued = 0;
    for schedule in due {
        let name = schedule.0.clone();
        match in_subtransaction(|| fire(&schedule, now)) {
            Ok(n) => enqueued += n,
            Err(message) => {
                if LOGGED.with(|logged| logged.borrow_mut().insert(name.clone())) {
                    warning!("pg_jobqueue: schedule \"{name}\" could not make its tick; the others did, and it is tried again at every pass: {message}");
                }
            }
        }
    }
    Ok(enqueued)
}

/// A due schedule as schedule_due.sql reads it.
type Due = (
    String,
    String,
    String,
    String,
    Payload,
    i32,
    Option<i32>,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    i32,
    TimestampWithTimeZone,
);

/// Enqueues the jobs of one due schedule, as its catch-up policy says, and moves it on.
fn fire(schedule: &Due, now: TimestampWithTimeZone) -> spi::Result<i32> {
    let (
        name,
        cron,
        time_zone,
        queue_name,
        payload,
        priority,
        max_attempts,
        dedup_key,
        ordering_key,
        concurrency_key,
        catch_up,
        limit,
        due_at,
    ) = schedule;
    // The row was checked when written; one that no longer parses (an operator's UPDATE) fails
    // here, inside the subtransaction, and is logged.
    let cron = Cron::parse(cron).unwrap_or_else(|problem| invalid_argument("cron", problem));
    let now_us: pg_sys::TimestampTz = now.into();
    let (ticks, next) = due_ticks(&cron, time_zone, (*due_at).into(), now_us, *limit as usize);
    let late = |tick: pg_sys::TimestampTz| now_us - tick > LATE_AFTER.as_micros() as i64;
    let latest = *ticks.back().expect("a due schedule has a due tick");
    let made: Vec<pg_sys::TimestampTz> = match catch_up.as_str() {
        "skip" => (!late(latest)).then_some(latest).into_iter().collect(),
        "once" => vec![latest],
        _ => ticks.into_iter().collect(),
    };
    let mut last = None;
    db::connect(|db| {
        for tick in &made {
            let job = NewJob {
                queue_name,
                payload: *payload,
                priority: *priority,
                run_at: Some(timestamp(*tick)),
                max_attempts: *max_attempts,
                dedup_key: dedup_key.as_deref(),
                ordering_key: ordering_key.as_deref(),
                concurrency_key: concurrency_key.as_deref(),
                expires_at: None,
                depends_on: None,
            };
            last = Some((*tick, enqueue::insert(db, &job, now)?));
        }
        let next = next.map(timestamp);
        let args = [
            name.as_str().into(),
            (*due_at).into(),
            next.into(),
            last.map(|(tick, _)| timestamp(tick)).into(),
            last.map(|(_, id)| id).into(),
        ];
        db.rows::<(String,)>(FIRED, &args)?;
        Ok(made.len() as i32)
    })
}

/// The ticks due from `first` (the schedule's next run, due) up to `now`, at most the latest
/// `keep` of them, oldest first, and the tick after `now` (None: none within five years).
fn due_ticks(
    cron: &Cron,
    zone: &str,
    first: pg_sys::TimestampTz,
    now: pg_sys::TimestampTz,
    keep: usize,
) -> (VecDeque<pg_sys::TimestampTz>, Option<pg_sys::TimestampTz>) {
    let mut ticks = VecDeque::from([first]);
    let mut at = first;
    let mut counted = 0;
    loop {
        let Some(next) = next_tick(cron, zone, at) else { return (ticks, None) };
        if next > now {
            return (ticks, Some(next));
        }
        counted += 1;
        if counted == MOST_TICKS_COUNTED {
            // Ticks so dense, missed for so long, that counting them all would stall the pass: go
            // on from twice the span the latest `keep` of them covered, before now.
            let span = (next - ticks.front().copied().unwrap_or(next)).max(1);
            if now - 2 * span > next {
                ticks.clear();
                at = now - 2 * span;
                continue;
            }
        }
        if ticks.len() == keep {
            ticks.pop_front();
        }
        ticks.push_back(next);
        at = next;
    }
}

/// The first tick of `cron` in `zone` after the instant `after`.
///
/// A local time that the change back from summer time repeats maps to its first occurrence
/// (`first_instant`), which is at or before `after` when `after` falls in the second: such a time
/// is passed over, so the repeated hour runs once.
fn next_tick(cron: &Cron, zone: &str, after: pg_sys::TimestampTz) -> Option<pg_sys::TimestampTz> {
    let mut local = to_local(zone, after);
    // A repeated hour has at most 3,600 local times to pass over; a few more for odd zones.
    for _ in 0..4000 {
        let candidate = cron.next_after(local)?;
        let at = first_instant(zone, candidate);
        if at > after {
            return Some(at);
        }
        local = candidate;
    }
    None
}

const MICROS: i64 = 1_000_000;

/// The local time in `zone` of an instant, to the second (`instant AT TIME ZONE zone`, by the zone's
/// rules alone: never read as an abbreviation, whatever the session's `timezone_abbreviations`).
fn to_local(zone: &str, at: pg_sys::TimestampTz) -> Civil {
    let rules = zone_rules(zone);
    // SAFETY: timestamp2tm and tm2timestamp fill the locals passed; the zone's rules come from
    // pg_tzset, which keeps them for the life of the process.
    let local = unsafe {
        let mut tm: pg_sys::pg_tm = std::mem::zeroed();
        let mut fsec: pg_sys::fsec_t = 0;
        let mut offset: std::ffi::c_int = 0;
        let mut local: pg_sys::Timestamp = 0;
        if pg_sys::timestamp2tm(at, &mut offset, &mut tm, &mut fsec, std::ptr::null_mut(), rules) != 0
            || pg_sys::tm2timestamp(&mut tm, fsec, std::ptr::null_mut(), &mut local) != 0
        {
            error!("a tick's time is out of range in time zone {zone}");
        }
        local
    };
    Civil::from_seconds(local.div_euclid(MICROS))
}

/// The instant of a local time in `zone`: its first occurrence, where the change back from summer
/// time repeats it. PostgreSQL (`local AT TIME ZONE zone`) takes the later one, in standard time;
/// the offset in force a day before gives the earlier, if that maps back to the same local time.
fn first_instant(zone: &str, local: Civil) -> pg_sys::TimestampTz {
    let at = to_instant(zone, local);
    let offset_before = to_local(zone, at - 86_400 * MICROS).to_seconds() - (at - 86_400 * MICROS).div_euclid(MICROS);
    let earlier = (local.to_seconds() - offset_before) * MICROS;
    if earlier < at && to_local(zone, earlier) == local {
        earlier
    } else {
        at
    }
}

/// The instant PostgreSQL gives a local time in `zone` (`local AT TIME ZONE zone`, by the zone's
/// rules alone, as `to_local`).
fn to_instant(zone: &str, local: Civil) -> pg_sys::TimestampTz {
    let rules = zone_rules(zone);
    // SAFETY: as in `to_local`; DetermineTimeZoneOffset reads the broken-down local time.
    unsafe {
        let mut tm: pg_sys::pg_tm = std::mem::zeroed();
        let mut fsec: pg_sys::fsec_t = 0;
        let mut at: pg_sys::TimestampTz = 0;
        if pg_sys::timestamp2tm(
            local.to_seconds() * MICROS,
            std::ptr::null_mut(),
            &mut tm,
            &mut fsec,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        ) != 0
        {
            error!("a tick's time is out of range in time zone {zone}");
        }
        let mut offset = pg_sys::DetermineTimeZoneOffset(&mut tm, rules);
        if pg_sys::tm2timestamp(&mut tm, fsec, &mut offset, &mut at) != 0 {
            error!("a tick's time is out of range in time zone {zone}");
        }
        at
    }
}

/// The rules of a time zone of the tz database, by name (PostgreSQL keeps them once loaded).
fn zone_rules(zone: &str) -> *mut pg_sys::pg_tz {
    let name = std::ffi::CString::new(zone).unwrap_or_default();
    // SAFETY: pg_tzset reads a NUL-terminated name and returns NULL for an unknown one.
    let rules = unsafe { pg_sys::pg_tzset(name.as_ptr()) };
    if rules.is_null() {
        error!("the time zone \"{zone}\" is not one this server knows");
    }
    rules
}

fn timestamp(at: pg_sys::TimestampTz) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(at).expect("a tick is a finite time")
}

fn schedule_name(value: Option<&str>) -> &str {
    let name = value.unwrap_or_else(|| null_argument("name"));
    if name.is_empty()
        || name.chars().count() > MAX_NAME_CHARS
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
    {
        invalid_argument(
            "name",
            format_args!("must be 1 to {MAX_NAME_CHARS} letters, digits and the characters _ - . :"),
        );
    }
    name
}

fn cron_argument(value: Option<&str>) -> (&str, Cron) {
    let text = value.unwrap_or_else(|| null_argument("cron"));
    let cron = Cron::parse(text).unwrap_or_else(|problem| invalid_argument("cron", problem));
    (text.trim(), cron)
}

/// A full time zone name the server knows (as in `pg_timezone_names`): an area and a location
/// (`Europe/Paris`, `America/New_York`, `Etc/GMT+5`), or `UTC`. Abbreviations (`CET`, `EST`) are
/// refused, though the tz database has zones of some of those names: in SQL they read as fixed
/// offsets, without summer time, and as another offset in another `timezone_abbreviations` (`EST`
/// is five hours behind UTC in the default set, ten ahead in `Australia`).
fn zone(value: Option<&str>) -> &str {
    let name = value.unwrap_or_else(|| null_argument("time_zone"));
    let known = std::ffi::CString::new(name)
        // SAFETY: pg_tzset reads a NUL-terminated name and returns NULL for an unknown one.
        .map(|c| !unsafe { pg_sys::pg_tzset(c.as_ptr()) }.is_null())
        .unwrap_or(false);
    if !known || name.len() > 64 {
        invalid_argument(
            "time_zone",
            format_args!("\"{name}\" is not a time zone this server knows (see pg_timezone_names)"),
        );
    }
    if name != "UTC" && !name.contains('/') {
        invalid_argument(
            "time_zone",
            format_args!(
                "\"{name}\" is not a full time zone name: give an area and a location, such as America/New_York, or UTC"
            ),
        );
    }
    name
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    fn runs(cron: &str, zone: &str, after: &str, count: i32) -> String {
        one::<String>(&format!(
            "SELECT string_agg(to_char(t AT TIME ZONE 'UTC', 'MM-DD HH24:MI'), ', ' ORDER BY t)
             FROM jq_cron_next('{cron}', '{zone}', '{after}', {count}) AS t"
        ))
    }

    /// America/New_York changed to summer time at 02:00 on 2026-03-08 (to 03:00) and back at 02:00
    /// on 2026-11-01 (to 01:00).
    #[pg_test]
    fn a_skipped_or_repeated_local_hour_runs_once() {
        // 02:30 does not exist on 03-08: that run is at 03:30 EDT (07:30 UTC), once.
        assert_eq!(
            runs("30 2 * * *", "America/New_York", "2026-03-07 12:00+00", 3),
            "03-08 07:30, 03-09 06:30, 03-10 06:30"
        );
        // Every half hour across the skipped hour: 01:00 and 01:30 EST, then one run for 02:00-02:59
        // (at 03:00 EDT), then 03:30 EDT.
        assert_eq!(
            runs("0,30 * * * *", "America/New_York", "2026-03-08 05:59+00", 4),
            "03-08 06:00, 03-08 06:30, 03-08 07:00, 03-08 07:30"
        );
        // 01:30 happens twice on 11-01 (EDT, then EST): it runs at the first only.
        assert_eq!(runs("30 1 * * *", "America/New_York", "2026-10-31 12:00+00", 2), "11-01 05:30, 11-02 06:30");
        // Every half hour across the repeated hour: the hour runs once, in summer time.
        assert_eq!(
            runs("0,30 * * * *", "America/New_York", "2026-11-01 04:59+00", 4),
            "11-01 05:00, 11-01 05:30, 11-01 07:00, 11-01 07:30"
        );
        assert_eq!(runs("0 12 * * *", "UTC", "2026-12-02 12:00+00", 2), "12-03 12:00, 12-04 12:00");
    }

    #[pg_test]
    #[should_panic(expected = "time_zone \"Mars/Olympus\" is not a time zone this server knows")]
    fn an_unknown_time_zone_is_refused() {
        run("SELECT jq_schedule('s', '* * * * *', 'q', '{}', time_zone => 'Mars/Olympus')");
    }

    #[pg_test]
    #[should_panic(expected = "time_zone \"EST\" is not a full time zone name")]
    fn an_abbreviation_is_refused() {
        run("SELECT jq_schedule('s', '* * * * *', 'q', '{}', time_zone => 'EST')");
    }

    /// A tick is the same whatever the settings of the session whose maintenance (here `jq_reap`)
    /// makes it: a schedule kept from before abbreviations were refused, in `EST`, ticks at noon by
    /// that zone's own rules (17:00 UTC) in a session that reads `EST` as Australian (UTC+10), in
    /// Tokyo's time and another date style; and the session keeps its settings.
    #[pg_test]
    fn a_sessions_settings_change_no_tick() {
        run("SELECT jq_schedule('noon', '0 12 * * *', 'noon_q', '{}')");
        run("UPDATE jq_schedule_specs SET time_zone = 'EST', next_run = clock_timestamp() - interval '1 minute'
             WHERE name = 'noon'");
        run("SET LOCAL timezone_abbreviations = 'Australia'");
        run("SET LOCAL timezone = 'Asia/Tokyo'");
        run("SET LOCAL DateStyle = 'SQL, DMY'");
        run("SELECT jq_reap()");
        assert_eq!(jobs("noon_q"), 1);
        assert_eq!(
            one::<String>(
                "SELECT to_char(next_run AT TIME ZONE 'Etc/UTC', 'HH24:MI') FROM jq_schedule_specs WHERE name = 'noon'"
            ),
            "17:00"
        );
        assert_eq!(one::<String>("SELECT current_setting('timezone_abbreviations')"), "Australia");
        assert_eq!(one::<String>("SELECT current_setting('DateStyle')"), "SQL, DMY");
    }

    #[pg_test]
    #[should_panic(expected = "cron has 61 in the seconds field, outside 0 to 59")]
    fn a_bad_expression_is_refused_with_its_reason() {
        run("SELECT jq_schedule('s', '61 * * * * *', 'q', '{}')");
    }

    /// Puts the schedule's next run `ago` into the past, as if no ticker had run since.
    fn missed_since(name: &str, ago: &str) {
        run(&format!(
            "UPDATE jq_schedule_specs SET next_run = clock_timestamp() - interval '{ago}' WHERE name = '{name}'"
        ));
    }

    fn jobs(queue: &str) -> i64 {
        one::<i64>(&format!("SELECT count(*) FROM jq_jobs WHERE queue_name = '{queue}'"))
    }

    #[pg_test]
    fn a_tick_enqueues_the_schedules_job_with_its_options_and_moves_it_on() {
        // Once a year (six fields: at second 0 of midnight, January 1st), so that the run after the
        // tick is months away and the second jq_reap below has nothing due, however slow the machine.
        let next = one::<bool>(
            "SELECT jq_schedule('report', '0 0 0 1 1 *', 'reports', '{\"kind\": \"daily\"}', priority => 5,
                                max_attempts => 2, concurrency_key => 'acme')
                    BETWEEN clock_timestamp() AND clock_timestamp() + interval '1 year'",
        );
        assert!(next, "once a year: the next run is within a year");
        assert_eq!(one::<i32>("SELECT jq_reap()"), 0, "jq_reap counts leases only");
        assert_eq!(jobs("reports"), 0, "not due yet");
        missed_since("report", "0.5 s");
        let ticked_at = one::<String>("SELECT clock_timestamp()::text");
        run("SELECT jq_reap()");
        assert!(one::<bool>(
            "SELECT payload = '{\"kind\": \"daily\"}' AND priority = 5 AND max_attempts = 2
                AND concurrency_key = 'acme' AND status = 'pending'
             FROM jq_jobs WHERE queue_name = 'reports'"
        ));
        // Moved on past the tick's clock, to the next January 1st: nothing is due.
        assert!(one::<bool>(&format!(
            "SELECT s.last_job_id = j.id AND s.last_run = j.available_at AND s.next_run > '{ticked_at}'
                AND s.next_run > clock_timestamp() AND s.last_job_status = 'pending'
             FROM jq_schedules s JOIN jq_jobs j ON j.queue_name = s.queue_name WHERE s.name = 'report'"
        )));
        run("SELECT jq_reap()");
        assert_eq!(jobs("reports"), 1, "a tick is made once");
    }

    #[pg_test]
    fn catch_up_skip_once_and_each() {
        for (name, policy) in [("skip", "skip"), ("once", "once"), ("each", "each")] {
            run(&format!(
                "SELECT jq_schedule('{name}', '*/10 * * * * *', '{name}', '{{}}', catch_up => '{policy}', catch_up_limit => 4)"
            ));
            missed_since(name, "5 minutes");
        }
        // Yearly, so that no later tick falls within a minute of now: an hourly one made this test
        // fail in the first minute of every hour (its next tick was then less than a minute late).
        run("SELECT jq_schedule('hourly', '0 0 1 1 *', 'hourly', '{}', catch_up => 'skip')");
        missed_since("hourly", "30 minutes");
        // When the ticks ran, to compare the next runs with: the clock read after them may already
        // be past a ten-second tick that was still to come when they ran.
        run("SELECT set_config('jq_test.ticked_at', clock_timestamp()::text, true)");
        run("SELECT jq_reap()");
        assert_eq!(jobs("once"), 1, "once: one job for the latest tick");
        assert_eq!(jobs("each"), 4, "each: the latest catch_up_limit ticks");
        assert_eq!(jobs("skip"), 1, "skip: the latest tick, less than a minute late, still runs");
        assert_eq!(jobs("hourly"), 0, "skip: a tick half an hour late is dropped");
        assert!(
            one::<bool>(
                "SELECT max(available_at) - min(available_at) = interval '30 s' FROM jq_jobs WHERE queue_name = 'each'"
            ),
            "one job per tick, ten seconds apart, the latest four"
        );
        assert!(one::<bool>(
            "SELECT bool_and(next_run > current_setting('jq_test.ticked_at')::timestamptz) FROM jq_schedule_specs"
        ));
    }

    #[pg_test]
    fn a_paused_schedule_makes_no_tick_and_resumes_from_now() {
        run("SELECT jq_schedule('s', '* * * * * *', 'q', '{}')");
        assert!(one::<bool>("SELECT jq_pause_schedule('s')"));
        assert!(!one::<bool>("SELECT jq_pause_schedule('s')"), "already paused");
        missed_since("s", "1 hour");
        run("SELECT jq_reap()");
        assert_eq!(jobs("q"), 0);
        assert!(one::<bool>("SELECT next_run IS NULL AND paused FROM jq_schedules WHERE name = 's'"));
        assert!(one::<bool>("SELECT jq_resume_schedule('s')"));
        assert!(
            one::<bool>("SELECT next_run > clock_timestamp() FROM jq_schedules WHERE name = 's'"),
            "the paused hour is not made up"
        );
        run("SELECT jq_reap()");
        assert_eq!(jobs("q"), 0);
        assert!(one::<bool>("SELECT jq_unschedule('s')"));
        assert!(!one::<bool>("SELECT jq_unschedule('s')"));
    }

    #[pg_test]
    fn replacing_a_schedule_keeps_its_last_run() {
        run("SELECT jq_schedule('s', '* * * * * *', 'q', '{}')");
        missed_since("s", "0.5 s");
        run("SELECT jq_reap()");
        run("SELECT jq_schedule('s', '0 0 * * *', 'q', '{\"v\": 2}')");
        assert!(one::<bool>(
            "SELECT cron = '0 0 * * *' AND payload = '{\"v\": 2}' AND last_job_id IS NOT NULL
                AND next_run > clock_timestamp() + interval '1 s'
             FROM jq_schedules WHERE name = 's'"
        ));
    }

    /// A schedule whose expression no longer parses (an operator's UPDATE) still pauses and
    /// resumes, keeping its next run.
    #[pg_test]
    fn a_schedule_that_no_longer_parses_resumes_keeping_its_next_run() {
        run("SELECT jq_schedule('s', '* * * * * *', 'q', '{}', paused => true)");
        run("UPDATE jq_schedule_specs SET cron = 'not a cron' WHERE name = 's'");
        let before = one::<String>("SELECT next_run::text FROM jq_schedule_specs WHERE name = 's'");
        assert!(one::<bool>("SELECT jq_resume_schedule('s')"));
        assert_eq!(one::<String>("SELECT next_run::text FROM jq_schedule_specs WHERE name = 's'"), before);
    }

    /// One schedule whose job cannot be enqueued does not stop the others' ticks.
    #[pg_test]
    fn a_failing_schedule_leaves_the_others_ticking() {
        run("SELECT jq_schedule('bad', '* * * * * *', 'q1', '{}')");
        run("SELECT jq_schedule('good', '* * * * * *', 'q2', '{}')");
        run("UPDATE jq_schedule_specs SET cron = 'not a cron' WHERE name = 'bad'");
        missed_since("bad", "0.5 s");
        missed_since("good", "0.5 s");
        run("SELECT jq_reap()");
        assert_eq!((jobs("q1"), jobs("q2")), (0, 1));
        assert!(
            one::<bool>("SELECT next_run < clock_timestamp() FROM jq_schedule_specs WHERE name = 'bad'"),
            "kept for the next pass"
        );
    }
}
