//! The claim's third stage: the claim statements, run in the turn of this session's key rotation.
//!
//! `claim.sql` (jobs without a concurrency key) and `claim_keyed.sql` (jobs with one, key by key,
//! `api::keys`) each end with `parts/claim_update.sql`. Each statement is made, once per backend,
//! with only the parts its queue uses: sections only some claims need are marked
//! `-- <name>: begin` / `-- <name>: end` (their headers say which), and each `-- ordering key check`
//! line becomes the check of `parts/ordering_key_check.sql`, or, for a queue that has never had a
//! job with an ordering key, a condition that takes no such job (`api::settings`).

use std::sync::LazyLock;

use pgrx::datum::{DatumWithOid, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi::{self, SpiHeapTupleData};

use super::admit;
use super::prepare::{Front, Start};
use super::text::ordering_keys;
use super::{ClaimedJob, Request};
use crate::api::settings::Settings;
use crate::api::{keys, tokens};
use crate::db::text::without_sections;
use crate::db::{self, payload::Payload, Column, FromRow, Session};
use crate::shared::front::Fairness;

pub(super) const CLAIM: &str = concat!(
    include_str!("../../../sql/queries/claim.sql"),
    include_str!("../../../sql/queries/parts/claim_update.sql")
);
const KEYED: &str = concat!(
    include_str!("../../../sql/queries/claim_keyed.sql"),
    include_str!("../../../sql/queries/parts/claim_update.sql")
);

/// The arguments of a claim statement, $1 to $12 of claim.sql.
pub(crate) type Args = [DatumWithOid<'static>; 12];

/// Claim order as a sort key: starving jobs first, oldest first; then `priority DESC, available_at, id`.
pub(super) type ClaimOrder = (bool, std::cmp::Reverse<i32>, pg_sys::TimestampTz, i64);

/// One row a claim statement returns: the job as jq_claim returns it, then what the claim needs
/// besides, in the statements' column order.
struct Row {
    id: i64,
    queue_name: String,
    payload: Payload,
    priority: i32,
    attempt_count: i32,
    max_attempts: i32,
    lease_token: i64,
    lease_expires_at: TimestampWithTimeZone,
    available_at: TimestampWithTimeZone,
    /// Claimed by the fairness check, ahead of claim order.
    starved: bool,
    concurrency_key: Option<String>,
    /// What the fairness check saw (the same on every row; NULL in the statements without it).
    oldest_pending: Option<TimestampWithTimeZone>,
    one_priority: Option<i32>,
}

impl FromRow for Row {
    fn from_row(row: &SpiHeapTupleData) -> spi::Result<Self> {
        Ok(Row {
            id: Column::column(row, 1)?,
            queue_name: Column::column(row, 2)?,
            payload: Column::column(row, 3)?,
            priority: Column::column(row, 4)?,
            attempt_count: Column::column(row, 5)?,
            max_attempts: Column::column(row, 6)?,
            lease_token: Column::column(row, 7)?,
            lease_expires_at: Column::column(row, 8)?,
            available_at: Column::column(row, 9)?,
            starved: Column::column(row, 10)?,
            concurrency_key: Column::column(row, 11)?,
            oldest_pending: Column::column(row, 12)?,
            one_priority: Column::column(row, 13)?,
        })
    }
}

impl Row {
    /// The job as jq_claim returns it, and its place in claim order.
    fn claimed(self) -> Claimed {
        let rank = if self.starved { 0 } else { self.priority };
        let order = (!self.starved, std::cmp::Reverse(rank), self.available_at.into(), self.id);
        let job = (
            self.id,
            self.queue_name,
            self.payload,
            self.priority,
            self.attempt_count,
            self.max_attempts,
            self.lease_token,
            self.lease_expires_at,
        );
        Claimed { job, order }
    }
}

/// A claimed job and its place in claim order.
pub(super) struct Claimed {
    pub job: ClaimedJob,
    pub order: ClaimOrder,
}

/// What one claim took: the jobs without a key and what their fairness check saw, then the jobs
/// with a key, and when a key rate that held jobs back opens its next window.
#[derive(Default)]
pub(super) struct Taken {
    pub unkeyed: Vec<Claimed>,
    pub fairness: Option<Fairness>,
    pub keyed: Vec<Claimed>,
    pub again_at: Option<pg_sys::TimestampTz>,
}

/// Takes the jobs: up to the admitted `batch_size`, within a concurrency limit's free slots if the
/// queue has a limit (`admit::free_slots`). Claiming, and taking a limited queue's row lock, are
/// lease writes: lost in a crash, they cost a job that runs again (see
/// `shared::xact::lease_write`).
/// The queue's `default_lease`, at most `pg_jobqueue.max_lease`: a default set before the limit was
/// lowered is cut to it, as a claim's own `lease` could not ask for more.
fn default_lease(settings: &Settings) -> pgrx::datum::Interval {
    let max_micros = i64::from(crate::guc::MAX_LEASE_SECONDS.get()) * 1_000_000;
    if crate::input::nominal_micros(settings.default_lease) <= i128::from(max_micros) {
        return settings.default_lease;
    }
    pgrx::datum::Interval::new(0, 0, max_micros).expect("pg_jobqueue.max_lease is a valid interval")
}

pub(super) fn take(
    request: &Request,
    start: &Start,
    front: &Front,
    batch_size: i32,
    waiting: bool,
    now: TimestampWithTimeZone,
) -> spi::Result<Taken> {
    let Request { queue_name, worker, lease, .. } = *request;
    let settings = &start.settings;
    let Some(queue_id) = settings.queue_id else {
        return Ok(Taken::default());
    };
    let mark = front.mark();
    // One range of the claim index is the whole claim order while every job the queue has had is
    // of priority 0 and the front is on it (claim.sql, "priorities").
    let one_priority = !settings.priorities && mark.priority == 0;
    let args = |batch_size: i32| -> Args {
        [
            queue_name.into(),
            worker.into(),
            lease.unwrap_or_else(|| default_lease(settings)).into(),
            batch_size.into(),
            now.into(),
            queue_id.into(),
            start.floor.into(),
            mark.priority.into(),
            super::prepare::timestamp(mark.available_at).into(),
            mark.id.into(),
            settings.max_runtime.into(),
            settings.starvation_limit.into(),
        ]
    };
    tokens::lease_write(|| {
        db::connect(|db| {
            if settings.concurrency_limit.is_none() {
                return in_turn(db, queue_name, batch_size, args, front.fair, one_priority, settings, now.into());
            }
            match admit::free_slots(db, queue_name, waiting, now)? {
                Some(free) => {
                    in_turn(db, queue_name, batch_size.min(free), args, front.fair, one_priority, settings, now.into())
                }
                None => Ok(Taken::default()),
            }
        })
    })
}

/// Takes up to `batch_size` jobs, those without a concurrency key (`claim_rows`) and those with
/// one (`keys::claim`), in the turn this session's key rotation is at: the keys first, unless the
/// jobs without a key have their turn (once a round) or the queue has no key with pending jobs.
/// Each takes what the one before left of the batch, and the keys go on after the jobs without a
/// key, so that a claim finds nothing only when neither has a claimable job (in the keys it
/// visits: at most `keys::MOST_KEYS_PER_CLAIM` per look). `args(n)` are the claim statement's
/// arguments for a batch of n; `fair`: the queue's fairness bound says no job can be starving;
/// `one_priority`: the queue has only had jobs of priority 0, and the front is on it.
#[allow(clippy::too_many_arguments)]
fn in_turn(
    db: &mut Session,
    queue_name: &str,
    batch_size: i32,
    args: impl Fn(i32) -> Args,
    fair: bool,
    one_priority: bool,
    settings: &Settings,
    now: pg_sys::TimestampTz,
) -> spi::Result<Taken> {
    let mut taken = Taken::default();
    let ordered = settings.ordering_keys;
    let keyed_rows = |db: &mut Session, want: i32, taken: &mut Taken| -> spi::Result<()> {
        let (rows, again_at) = keys::claim(
            db,
            statements_keyed(ordered, settings.rates.key.is_some(), settings.key_settings),
            || args(want),
            queue_name,
            settings,
            want,
            now,
            |row: &Row| row.concurrency_key.as_deref(),
        )?;
        taken.keyed.extend(rows.into_iter().map(Row::claimed));
        taken.again_at = taken.again_at.into_iter().chain(again_at).min();
        Ok(())
    };
    if keys::keys_first(queue_name) {
        keyed_rows(db, batch_size, &mut taken)?;
    }
    let left = batch_size - taken.keyed.len() as i32;
    if left == 0 {
        return Ok(taken);
    }
    let sql = if fair && one_priority { statement_one_priority(ordered) } else { statement(fair, ordered) };
    let rows: Vec<Row> = db.rows(sql, &args(left))?;
    taken.fairness = rows.first().filter(|_| !fair).map(|row| Fairness {
        oldest: row.oldest_pending.map(pg_sys::TimestampTz::from),
        limit: settings.starvation_limit_us,
        one_priority: row.one_priority,
    });
    taken.unkeyed = rows.into_iter().map(Row::claimed).collect();
    keys::unkeyed_served(queue_name);
    // What is left goes on with the keys: after the jobs without a key (their turn, or the end
    // of a round), or from where the keys' turn stopped.
    let left = left - taken.unkeyed.len() as i32;
    if left > 0 && keys::may_look(queue_name) {
        keyed_rows(db, left, &mut taken)?;
    }
    Ok(taken)
}

/// The claim statement made from `claim.sql`: without the fairness check (`lean`, while the
/// queue's fairness bound says no job can be starving), and with the ordering-key check or without
/// it (`ordered`: the queue has had a job with an ordering key), as that file's header describes.
pub(crate) fn statement(lean: bool, ordered: bool) -> &'static str {
    static STATEMENTS: LazyLock<[String; 4]> = LazyLock::new(|| {
        let lean = without_sections(CLAIM, "fairness");
        [
            ordering_keys(CLAIM, false),
            ordering_keys(CLAIM, true),
            ordering_keys(&lean, false),
            ordering_keys(&lean, true),
        ]
    });
    &STATEMENTS[usize::from(lean) * 2 + usize::from(ordered)]
}

/// The lean claim statement for a queue that has only had jobs of priority 0, while its front is
/// on that priority: without the walk of the priorities below the front (claim.sql,
/// "priorities"), which cost every claim five plan nodes to start and end and could find nothing.
pub(crate) fn statement_one_priority(ordered: bool) -> &'static str {
    static STATEMENTS: LazyLock<[String; 2]> = LazyLock::new(|| {
        let lean = without_sections(&without_sections(CLAIM, "fairness"), "priorities");
        [ordering_keys(&lean, false), ordering_keys(&lean, true)]
    });
    &STATEMENTS[usize::from(ordered)]
}

/// The keyed claim statements: `claim_keyed.sql` with `parts/claim_update.sql`, without its
/// fairness section; the first also without its key starvation section (as that file's header
/// says); each with the ordering-key check or without it (`ordered`), with the look-up of the key
/// rate or without it (`rated`: the queue has a key rate), and with the look-up of a key's own
/// limit or without it (`own_limits`: the queue has rows in jq_key_settings).
pub(crate) fn statements_keyed(ordered: bool, rated: bool, own_limits: bool) -> (&'static str, &'static str) {
    static STATEMENTS: LazyLock<Vec<(String, String)>> = LazyLock::new(|| {
        let made = |index: usize| {
            let (own_limits, rated, ordered) = (index & 4 != 0, index & 2 != 0, index & 1 != 0);
            let mut all = without_sections(KEYED, "fairness");
            if !rated {
                all = without_sections(&all, "key rate");
            }
            if !own_limits {
                all = without_sections(&all, "key settings");
            }
            let plain = without_sections(&all, "key starvation");
            (ordering_keys(&plain, ordered), ordering_keys(&all, ordered))
        };
        (0..8).map(made).collect()
    });
    let (plain, starvation) = &STATEMENTS[usize::from(own_limits) * 4 + usize::from(rated) * 2 + usize::from(ordered)];
    (plain.as_str(), starvation.as_str())
}

#[cfg(test)]
mod unit {
    use super::*;
    use crate::api::claim::text::ORDERING_KEY_CHECK;

    #[test]
    fn the_lean_claim_is_claim_sql_without_its_fairness_sections() {
        for ordered in [false, true] {
            let lean = statement(true, ordered);
            for fairness_only in ["oldest AS", "starving AS", ") AS starving\n", "FROM oldest"] {
                assert!(CLAIM.contains(fairness_only) && !lean.contains(fairness_only), "{fairness_only}");
            }
            assert!(lean.contains("\n          NULL::timestamptz AS oldest_pending, NULL::int AS one_priority\n"));
            for both in ["picked AS (", ") AS at_front", ") AS below_front", "UPDATE jq_live_jobs j", "RETURNING j.id"]
            {
                assert!(lean.contains(both), "{both}");
            }
            let markers = ["-- fairness: begin", "-- fairness: end"];
            assert!(lean.lines().all(|line| !markers.contains(&line.trim()) && !line.starts_with("-- without ")));
        }
    }

    /// A queue of one priority claims with one range of the claim index: the lean statement without
    /// its walk below the front, and nothing else left out.
    #[test]
    fn the_one_priority_claim_is_the_lean_claim_without_the_walk_below_the_front() {
        for ordered in [false, true] {
            let (one, lean) = (statement_one_priority(ordered), statement(true, ordered));
            assert!(lean.contains(") AS below_front") && lean.contains("UNION ALL"));
            assert!(!one.contains(") AS below_front") && !one.contains("UNION ALL"), "{one}");
            assert!(one.contains(") AS at_front") && one.contains("RETURNING j.id"));
            assert_eq!(one, without_sections(lean, "priorities"));
            assert!(one.lines().all(|line| !line.trim().starts_with("-- priorities:")));
        }
    }

    /// A queue without a key rate claims by keys with a statement that looks up no rate: the one
    /// with the look-up, its section taken out for no limit at all, and nothing else changed.
    #[test]
    fn keyed_claims_look_up_a_key_rate_only_for_a_queue_that_has_one() {
        for (ordered, own_limits) in [(false, false), (true, false), (false, true), (true, true)] {
            let (rated, unrated) =
                (statements_keyed(ordered, true, own_limits), statements_keyed(ordered, false, own_limits));
            for (with, without) in [(rated.0, unrated.0), (rated.1, unrated.1)] {
                assert!(with.contains("FROM jq_rate_counts c"), "{with}");
                assert!(
                    !without.contains("jq_rate_counts") && without.contains("SELECT 2147483647 AS free"),
                    "{without}"
                );
                assert_eq!(without, without_sections(with, "key rate"));
            }
        }
    }

    /// A queue without rows in jq_key_settings claims by keys with a statement that looks up no
    /// key's own limit: the one with the look-up, its section taken out, the queue's limit (a
    /// parameter, kept with its settings) then the only one; and none reads jq_queues.
    #[test]
    fn keyed_claims_look_up_a_key_limit_only_for_a_queue_that_has_some() {
        for (ordered, rated) in [(false, false), (true, false), (false, true), (true, true)] {
            let (own, none) = (statements_keyed(ordered, rated, true), statements_keyed(ordered, rated, false));
            for (with, without) in [(own.0, none.0), (own.1, none.1)] {
                assert!(with.contains("FROM jq_key_settings s"), "{with}");
                assert!(!without.contains("FROM jq_key_settings"), "{without}");
                assert_eq!(without, without_sections(with, "key settings"));
                assert!(!with.contains("FROM jq_queues") && without.contains("$17::int, 2147483647)"), "{without}");
            }
        }
    }

    /// The ordering-key check (guide, "jq_enqueue": `ordering_key`) has one source, taken in at each place a
    /// claim statement walks pending jobs; a statement without it takes no job with an ordering
    /// key at each of those places, and differs from the one with it in nothing else.
    #[test]
    fn every_statement_takes_the_one_ordering_key_check_or_refuses_ordered_jobs() {
        let check = ORDERING_KEY_CHECK.lines().filter(|line| !line.starts_with("--")).collect::<Vec<_>>();
        let without = "AND j.ordering_key IS NULL";
        let made = [
            (statement(false, false), statement(false, true), 4),
            (statement(true, false), statement(true, true), 2),
            (statement_one_priority(false), statement_one_priority(true), 1),
            (statements_keyed(false, false, false).0, statements_keyed(true, false, false).0, 1),
            (statements_keyed(false, false, false).1, statements_keyed(true, false, false).1, 2),
            (statements_keyed(false, true, false).0, statements_keyed(true, true, false).0, 1),
            (statements_keyed(false, true, false).1, statements_keyed(true, true, false).1, 2),
            (statements_keyed(false, false, true).0, statements_keyed(true, false, true).0, 1),
            (statements_keyed(false, true, true).1, statements_keyed(true, true, true).1, 2),
        ];
        for (plain, ordered, places) in made {
            assert_eq!(plain.matches(without).count(), places, "{plain}");
            assert_eq!(ordered.matches(check[0]).count(), places);
            assert!(!plain.contains("-- ordering key check") && !ordered.contains("-- ordering key check"));
            // Each condition without the check, replaced by the check, gives the statement with it.
            let mut back = String::new();
            for line in plain.lines() {
                match line.strip_suffix(without) {
                    Some(indent) if indent.trim().is_empty() => {
                        check.iter().for_each(|part| back.push_str(&format!("{indent}{part}\n")))
                    }
                    _ => back.push_str(&format!("{line}\n")),
                }
            }
            assert_eq!(back, ordered);
        }
        // A waiting claim's look for a free slot always checks ordering keys.
        assert_eq!(admit::slot_free().matches(check[0]).count(), 1);
    }
}
