//! The claim's third stage: the claim statements, run in the turn of this session's key rotation.
//!
//! `claim.sql` (jobs without a concurrency key) and `claim_keyed.sql` (jobs with one, key by key,
//! `api::keys`) sit between the same two parts (`parts/claim_queue.sql`, `parts/claim_update.sql`).
//! Each has sections only some claims need, marked `-- <name>: begin` / `-- <name>: end` (their
//! headers say which): the statements without them are made once per backend.

use std::sync::LazyLock;

use pgrx::datum::{DatumWithOid, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi::{self, SpiHeapTupleData};

use super::admit;
use super::prepare::{Front, Start};
use super::{ClaimedJob, Request};
use crate::api::{keys, rates, tokens};
use crate::db::{self, payload::Payload, Column, FromRow, Session};

pub(super) const CLAIM: &str = concat!(
    include_str!("../../../sql/queries/parts/claim_queue.sql"),
    include_str!("../../../sql/queries/claim.sql"),
    include_str!("../../../sql/queries/parts/claim_update.sql")
);
const KEYED: &str = concat!(
    include_str!("../../../sql/queries/parts/claim_queue.sql"),
    include_str!("../../../sql/queries/claim_keyed.sql"),
    include_str!("../../../sql/queries/parts/claim_update.sql")
);

/// Claim order as a sort key: starving jobs first, oldest first; then `priority DESC, available_at, id`.
pub(super) type ClaimOrder = (bool, std::cmp::Reverse<i32>, pg_sys::TimestampTz, i64);

/// What a claim's fairness check saw, for the queue's fairness bound: the oldest pending job
/// (None: none) and the starvation limit (None: none), in microseconds.
pub(super) type FairnessSeen = (Option<i64>, Option<i64>);

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
    starvation_limit_us: Option<i64>,
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
            starvation_limit_us: Column::column(row, 13)?,
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
    pub fairness: Option<FairnessSeen>,
    pub keyed: Vec<Claimed>,
    pub again_at: Option<pg_sys::TimestampTz>,
}

impl Taken {
    pub fn is_empty(&self) -> bool {
        self.unkeyed.is_empty() && self.keyed.is_empty()
    }
}

/// Takes the jobs: up to the admitted `batch_size`, and, when that found nothing, once more within
/// a concurrency limit's free slots (`admit::free_slots`). Claiming, and taking a limited queue's
/// row lock, are lease writes: lost in a crash, they cost a job that runs again (see
/// `shared::xact::lease_write`).
pub(super) fn take(
    request: &Request,
    start: &Start,
    front: &Front,
    batch_size: i32,
    waiting: bool,
    now: TimestampWithTimeZone,
) -> spi::Result<Taken> {
    let Request { queue_name, worker, lease, .. } = *request;
    let mark = front.mark();
    let args = |batch_size: i32, admitted: bool| -> [DatumWithOid<'static>; 10] {
        [
            queue_name.into(),
            worker.into(),
            lease.into(),
            batch_size.into(),
            now.into(),
            admitted.into(),
            start.floor.into(),
            mark.priority.into(),
            super::prepare::timestamp(mark.available_at).into(),
            mark.id.into(),
        ]
    };
    let turn = |db: &mut Session, batch_size: i32, admitted: bool| {
        in_turn(db, queue_name, batch_size, |n| args(n, admitted), front.fair, start.rates.key, now.into())
    };
    tokens::lease_write(|| {
        db::connect(|db| {
            let taken = turn(db, batch_size, false)?;
            if !taken.is_empty() {
                return Ok(taken);
            }
            match admit::free_slots(db, queue_name, waiting, now)? {
                Some(free) => turn(db, batch_size.min(free), true),
                None => Ok(taken),
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
/// arguments for a batch of n; `fair`: the queue's fairness bound says no job can be starving.
fn in_turn(
    db: &mut Session,
    queue_name: &str,
    batch_size: i32,
    args: impl Fn(i32) -> [DatumWithOid<'static>; 10],
    fair: bool,
    key_rate: Option<rates::Rate>,
    now: pg_sys::TimestampTz,
) -> spi::Result<Taken> {
    let mut taken = Taken::default();
    let keyed_rows = |db: &mut Session, want: i32, taken: &mut Taken| -> spi::Result<()> {
        let (rows, again_at) = keys::claim(db, statements_keyed(), || args(want), queue_name, want, key_rate, now, {
            |row: &Row| row.concurrency_key.as_deref()
        })?;
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
    let rows: Vec<Row> = db.rows(statement(fair), &args(left))?;
    taken.fairness = rows
        .first()
        .filter(|_| !fair)
        .map(|row| (row.oldest_pending.map(pg_sys::TimestampTz::from), row.starvation_limit_us));
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

/// The claim statement: `claim.sql` between its parts, or (`lean`, while the queue's fairness
/// bound says no job can be starving) the statement made from it without the fairness check, as
/// that file's header describes.
pub(crate) fn statement(lean: bool) -> &'static str {
    static LEAN: LazyLock<String> = LazyLock::new(|| without_sections(CLAIM, "fairness"));
    if lean {
        LEAN.as_str()
    } else {
        CLAIM
    }
}

/// The keyed claim statements: `claim_keyed.sql` between the same parts, without their fairness
/// sections; the first also without its key starvation section (as that file's header says).
pub(crate) fn statements_keyed() -> (&'static str, &'static str) {
    static STATEMENTS: LazyLock<(String, String)> = LazyLock::new(|| {
        let starvation = without_sections(KEYED, "fairness");
        (without_sections(&starvation, "key starvation"), starvation)
    });
    (STATEMENTS.0.as_str(), STATEMENTS.1.as_str())
}

/// `sql` without its lines from each `-- <name>: begin` to the next `-- <name>: end`, and with the
/// text of each `-- lean: ` line instead.
pub(super) fn without_sections(sql: &str, name: &str) -> String {
    let (begin, end) = (format!("-- {name}: begin"), format!("-- {name}: end"));
    let mut lean = String::with_capacity(sql.len());
    let mut skipping = false;
    for line in sql.lines() {
        match line.trim() {
            marker if marker == begin => skipping = true,
            marker if marker == end => skipping = false,
            _ if skipping => {}
            _ => {
                lean.push_str(line.strip_prefix("-- lean: ").unwrap_or(line));
                lean.push('\n');
            }
        }
    }
    assert!(!skipping, "a {name} section of a claim statement has no end");
    lean
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn the_lean_claim_is_claim_sql_without_its_fairness_sections() {
        let lean = statement(true);
        for fairness_only in ["oldest AS", "starving AS", ") AS starving\n", "FROM oldest", "starvation_limit_us FROM"]
        {
            assert!(CLAIM.contains(fairness_only) && !lean.contains(fairness_only), "{fairness_only}");
        }
        assert!(lean.contains("\n       NULL::timestamptz AS oldest_pending, NULL::bigint AS starvation_limit_us\n"));
        for both in ["queue AS (", ") AS at_front", ") AS below_front", "claimed AS (", "FROM claimed"] {
            assert!(lean.contains(both), "{both}");
        }
        let markers = ["-- fairness: begin", "-- fairness: end"];
        assert!(lean.lines().all(|line| !markers.contains(&line.trim()) && !line.starts_with("-- lean: ")));
    }

    /// The ordering-key check (README, "Ordering keys") is written out in each place a claim
    /// statement walks pending jobs: every copy must say the same.
    #[test]
    fn every_copy_of_the_ordering_key_check_is_the_same() {
        let start = "(j.ordering_key IS NULL OR NOT EXISTS (";
        let mut copies = Vec::new();
        for sql in [CLAIM, KEYED, crate::api::claim::admit::SLOT_FREE] {
            let sql = sql.lines().map(|l| l.split("--").next().unwrap()).collect::<Vec<_>>().join(" ");
            let sql = sql.split_whitespace().collect::<Vec<_>>().join(" ");
            for (at, _) in sql.match_indices(start) {
                let mut depth = 0;
                let end = sql[at..]
                    .char_indices()
                    .find_map(|(i, c)| {
                        depth += match c {
                            '(' => 1,
                            ')' => -1,
                            _ => 0,
                        };
                        (depth == 0).then_some(at + i + 1)
                    })
                    .unwrap();
                copies.push(sql[at..end].to_string());
            }
        }
        assert_eq!(copies.len(), 7, "{copies:#?}");
        assert!(copies.iter().all(|copy| copy == &copies[0]), "{copies:#?}");
    }

    #[test]
    #[should_panic(expected = "has no end")]
    fn an_unended_fairness_section_is_refused() {
        without_sections("SELECT 1\n-- fairness: begin\n, 2\n", "fairness");
    }
}
