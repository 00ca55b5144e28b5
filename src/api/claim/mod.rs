//! jq_claim: take claimable jobs under a lease, now or (with a `wait`) as soon as there are some.

use std::sync::LazyLock;
use std::time::Duration;

use pgrx::datum::{DatumWithOid, Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use super::{keys, maintenance, rates, tokens, wait};
use crate::db::{self, clock, payload::Payload, Session};
use crate::input;
use crate::rights::{self, Privilege};
use crate::shared::counters;
use crate::shared::front::{self, Key};

const CLAIM: &str = concat!(
    include_str!("../../sql/queries/parts/claim_queue.sql"),
    include_str!("../../sql/queries/claim.sql"),
    include_str!("../../sql/queries/parts/claim_update.sql")
);
const KEYED: &str = concat!(
    include_str!("../../sql/queries/parts/claim_queue.sql"),
    include_str!("../../sql/queries/claim_keyed.sql"),
    include_str!("../../sql/queries/parts/claim_update.sql")
);
const ADMIT: &str = include_str!("../../sql/queries/claim_admit.sql");
const RUNNING: &str = include_str!("../../sql/queries/claim_running.sql");
pub(crate) const SLOT_FREE: &str = concat!(
    include_str!("../../sql/queries/parts/pending_levels.sql"),
    include_str!("../../sql/queries/claim_slot_free.sql")
);
pub(crate) const ANY_DUE: &str = concat!(
    include_str!("../../sql/queries/parts/pending_levels.sql"),
    include_str!("../../sql/queries/claim_any_due.sql")
);
const FRONT: &str = include_str!("../../sql/queries/claim_front.sql");

/// One claimed job, in the column order of jq_claim's result.
pub type ClaimedJob = (i64, String, Payload, i32, i32, i32, i64, TimestampWithTimeZone);

/// Claims up to `batch_size` claimable jobs of the queue in one statement that never waits on a row
/// another claimer holds. Returns no rows when nothing is claimable, or, with a `wait`, when nothing
/// became claimable within it (see `wait`).
// pgrx reads the result columns from the signature, so the type is spelled out here.
#[allow(clippy::type_complexity)]
#[pg_extern(name = "jq_claim", volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
pub fn jq_claim_wait(
    queue_name: Option<&str>,
    worker: Option<&str>,
    lease: default!(Option<Interval>, "NULL"),
    batch_size: default!(Option<i32>, 1),
    wait: default!(Option<Interval>, "NULL"),
) -> spi::Result<
    TableIterator<
        'static,
        (
            name!(id, i64),
            name!(queue_name, String),
            name!(payload, Payload),
            name!(priority, i32),
            name!(attempt_count, i32),
            name!(max_attempts, i32),
            name!(lease_token, i64),
            name!(lease_expires_at, TimestampWithTimeZone),
        ),
    >,
> {
    let now = clock::now();
    let queue_name = input::queue_name(queue_name);
    let worker = input::worker(worker);
    let lease = input::lease_length("lease", lease, now);
    let batch_size = input::batch_size(batch_size);
    let wait = input::wait(wait, now);
    rights::require(queue_name, Privilege::Consume);
    let jobs = match wait {
        None => rights::as_owner(|| claim_now(queue_name, worker, lease, batch_size, false, now))?,
        Some(wait) => claim_waiting(queue_name, worker, lease, batch_size, wait)?,
    };
    Ok(TableIterator::new(jobs))
}

fn claim_waiting(
    queue_name: &str,
    worker: &str,
    lease: Option<Interval>,
    batch_size: i32,
    wait: Duration,
) -> spi::Result<Vec<ClaimedJob>> {
    wait::refuse_outside_read_committed();
    rights::as_owner(|| {
        let jobs = wait::look_until_found(queue_name, wait, |now| {
            // Asked again on every look: a right revoked while the claim waits ends it with 42501
            // (the revocation's invalidation is taken in first).
            rights::accept_invalidations();
            rights::require(queue_name, Privilege::Consume);
            claim_now(queue_name, worker, lease, batch_size, true, now)
        })?;
        maintenance::inline(queue_name, clock::now())?;
        Ok(jobs)
    })
}

/// One claim: the jobs claimable now, at most `batch_size`, in claim order.
///
/// A queue with a concurrency limit claims nothing in the first statement. Only then, when the first
/// statement came back empty, does the claim look for a limit: it takes the queue's row lock and
/// claims again within the free slots. Queues without a limit never take that lock, and a successful
/// claim of theirs costs nothing extra. A waiting claim (`waiting`) first checks without a lock that
/// a slot is free and a job is claimable: the lock, once taken, is held until the transaction ends,
/// and a claim that sleeps must not hold it, or the transaction id it brings. `now` is the clock of
/// this look, for its recovery and its claim alike.
fn claim_now(
    queue_name: &str,
    worker: &str,
    lease: Option<Interval>,
    batch_size: i32,
    waiting: bool,
    now: TimestampWithTimeZone,
) -> spi::Result<Vec<ClaimedJob>> {
    // A claim's share of its database's maintenance where no worker serves it. A waiting look
    // reaps only its own queue, and returns to commit what it reaped rather than sleep holding it;
    // the database's passes it takes as it returns (`claim_waiting`).
    if waiting {
        maintenance::reap_own_queue(queue_name, now)?;
    } else {
        maintenance::inline(queue_name, now)?;
    }
    let floor = match tokens::known_floor()? {
        Some(floor) => floor,
        // A waiting look that would find nothing must not write the epoch, or it would have to
        // return to commit it rather than sleep.
        None if waiting
            && !db::connect(|db| db.first::<bool>(ANY_DUE, &[queue_name.into(), now.into()]))?.unwrap_or(false) =>
        {
            return Ok(Vec::new());
        }
        None => tokens::raise()?,
    };
    // The queue's rate: what it leaves this claim, counted under its lock (see `rates`).
    let rates = rates::of(queue_name)?;
    let mut batch_size = batch_size;
    let mut rate_admitted = None;
    if let Some(rate) = rates.queue {
        refuse_a_stale_rate_count(queue_name);
        match db::connect(|db| rates::admit(db, queue_name, rate, now.into()))? {
            Ok(admitted) => {
                batch_size = batch_size.min(admitted.free);
                rate_admitted = Some(admitted);
            }
            Err(opens_at) => {
                if let Some(at) = opens_at {
                    wait::retry_at(at);
                }
                return Ok(Vec::new());
            }
        }
    }
    // Read before the claim's snapshot is taken (see `move_front`).
    let seen = if crate::guc::CLAIM_FRONT.get() { front::read(queue_name, now.into()) } else { None };
    let mark = seen.map_or(Key::BOTTOM, |seen| seen.mark);
    let args = |batch_size: i32, admitted: bool| -> [DatumWithOid<'static>; 10] {
        [
            queue_name.into(),
            worker.into(),
            lease.into(),
            batch_size.into(),
            now.into(),
            admitted.into(),
            floor.into(),
            mark.priority.into(),
            timestamp(mark.available_at).into(),
            mark.id.into(),
        ]
    };
    // Claiming, and taking a limited queue's row lock, are lease writes: lost in a crash, they cost
    // a job that runs again (see `shared::xact::lease_write`).
    // The fairness bound (README, "Fairness"): the queue's, in shared memory; without preload,
    // this session's own.
    let preloaded = crate::guc::preloaded();
    let fair = match seen {
        Some(seen) => seen.fair,
        None => !preloaded && front::session_fair(queue_name, now.into()),
    };
    let take = |db: &mut Session, batch_size: i32, admitted: bool| {
        take_in_turn(db, queue_name, batch_size, |n| args(n, admitted), fair, rates.key, now.into())
    };
    let (mut jobs, fairness, keyed) = tokens::lease_write(|| {
        db::connect(|db| {
            let claimed = take(db, batch_size, false)?;
            if !claimed.0.is_empty() || !claimed.2.is_empty() {
                return Ok(claimed);
            }
            if waiting && !db.first::<bool>(SLOT_FREE, &[queue_name.into(), now.into()])?.unwrap_or(false) {
                return Ok(claimed);
            }
            // Taking the row lock is also the test for a limit: it returns no row for an unlimited queue.
            let Some(limit) = db.first::<i32>(ADMIT, &[queue_name.into()])? else {
                return Ok(claimed);
            };
            let running = db.first::<i64>(RUNNING, &[queue_name.into()])?.unwrap_or(0);
            let free = i64::from(limit) - running;
            if free <= 0 {
                return Ok(claimed);
            }
            take(db, batch_size.min(free as i32), true)
        })
    })?;
    if let Some(admitted) = rate_admitted {
        // Outside the lease write: the count commits durably, and with it the claim.
        db::connect(|db| rates::count_admitted(db, queue_name, admitted, jobs.len() + keyed.len()))?;
    }
    if let Some(lowest) = jobs.iter().map(|(job, order)| key_of(job, order)).min() {
        // If this claim rolls back, its jobs are pending again, maybe below a front moved meanwhile.
        front::lower_at_rollback(queue_name, lowest);
    }
    // As with the front: only a snapshot taken after the read proves anything.
    // SAFETY: a plain read of the transaction's isolation level.
    let read_committed = unsafe { pg_sys::XactIsoLevel } < pg_sys::XACT_REPEATABLE_READ as i32;
    if let (Some((oldest, limit)), true) = (fairness, read_committed) {
        match &seen {
            Some(seen) => front::set_fair(queue_name, seen, oldest, limit, now.into()),
            None if !preloaded => front::set_session_fair(queue_name, oldest, limit, now.into()),
            None => {}
        }
    }
    if let Some(seen) = seen {
        move_front(queue_name, &seen, &jobs, now)?;
    }
    // Jobs with a concurrency key follow, in claim order among themselves (README, "Flow control").
    jobs.sort_unstable_by_key(|(_, order)| *order);
    let mut keyed = keyed;
    keyed.sort_unstable_by_key(|(_, order)| *order);
    jobs.extend(keyed);
    let now = pg_sys::TimestampTz::from(now);
    for (_, (_, _, available_at, _)) in &jobs {
        counters::claimed(queue_name, now - available_at);
    }
    Ok(jobs.into_iter().map(|(job, _)| job).collect())
}

/// Takes up to `batch_size` jobs, those without a concurrency key (`claim_rows`) and those with
/// one (`keys::claim`), in the turn this session's key rotation is at: the keys first, unless the
/// jobs without a key have their turn (once a round) or the queue has no key with pending jobs.
/// Each takes what the one before left of the batch, and the keys go on after the jobs without a
/// key, so that a claim finds nothing only when neither has a claimable job (in the keys it
/// visits: at most `keys::MOST_KEYS_PER_CLAIM` per look). `args(n)` are the claim statement's arguments
/// for a batch of n. Returns the jobs without a key with what their fairness check saw, then the
/// keyed jobs.
fn take_in_turn(
    db: &mut Session,
    queue_name: &str,
    batch_size: i32,
    args: impl Fn(i32) -> [DatumWithOid<'static>; 10],
    fair: bool,
    key_rate: Option<rates::Rate>,
    now: pg_sys::TimestampTz,
) -> spi::Result<Taken> {
    let keyed_rows = |db: &mut Session, want: i32| -> spi::Result<Vec<(ClaimedJob, ClaimOrder)>> {
        let rows: Vec<ClaimedRow> =
            keys::claim(db, statements_keyed(), || args(want), queue_name, want, key_rate, now, {
                |row: &ClaimedRow| row.10.as_deref()
            })?;
        Ok(rows.into_iter().map(claimed_job).collect())
    };
    let mut keyed = if keys::keys_first(queue_name) { keyed_rows(db, batch_size)? } else { Vec::new() };
    let left = batch_size - keyed.len() as i32;
    if left == 0 {
        return Ok((Vec::new(), None, keyed));
    }
    let (jobs, fairness) = claim_rows(db, &args(left), fair)?;
    keys::unkeyed_served(queue_name);
    // What is left goes on with the keys: after the jobs without a key (their turn, or the end
    // of a round), or from where the keys' turn stopped.
    let left = left - jobs.len() as i32;
    if left > 0 && keys::may_look(queue_name) {
        keyed.extend(keyed_rows(db, left)?);
    }
    Ok((jobs, fairness, keyed))
}

/// A queue rate counts claims in the claim's snapshot, which must be newer than the rate lock: not
/// so in REPEATABLE READ or SERIALIZABLE (see `keys::claim`'s refusal, for the same reason).
fn refuse_a_stale_rate_count(queue_name: &str) {
    // SAFETY: a plain read of the transaction's isolation level.
    if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        crate::error::flow_limit_needs_read_committed(queue_name, "rate_limit");
    }
}

/// Moves the queue's claim front up after a claim that read it as `seen` (README, "Old snapshots";
/// the rules are in `shared::front`). The lowest job this claim took in priority order proves the
/// front when it is on the front's priority: everything between was due, and this claim's walk
/// passed it as running, locked or too new for its snapshot (whose lowering `front` checks).
/// Otherwise a look finds the first pending key, from the front, or from the start once a second.
/// Only a claim whose snapshot was taken after its read may prove anything: not one in a
/// REPEATABLE READ or SERIALIZABLE transaction.
fn move_front(
    queue_name: &str,
    seen: &front::Seen,
    jobs: &[(ClaimedJob, ClaimOrder)],
    now: TimestampWithTimeZone,
) -> spi::Result<()> {
    // SAFETY: a plain read of the transaction's isolation level.
    if unsafe { pg_sys::XactIsoLevel } >= pg_sys::XACT_REPEATABLE_READ as i32 {
        return Ok(());
    }
    let in_order = jobs
        .iter()
        .filter(|(_, (in_priority_order, ..))| *in_priority_order)
        .map(|(job, order)| key_of(job, order))
        .min();
    let look_from = if seen.full_look_due {
        Key::BOTTOM
    } else if seen.keyed {
        return Ok(());
    } else {
        match in_order {
            Some(lowest) if lowest.priority == seen.mark.priority => {
                front::advance(queue_name, seen, lowest);
                return Ok(());
            }
            Some(_) if seen.look_due => seen.mark,
            None if seen.look_due && seen.mark == Key::BOTTOM => seen.mark,
            _ => return Ok(()),
        }
    };
    let args =
        [queue_name.into(), look_from.priority.into(), timestamp(look_from.available_at).into(), look_from.id.into()];
    // Part of the claim: WAL it may write (pruning a page it reads) keeps a leases-only commit so.
    let found = tokens::lease_write(|| {
        db::connect(|db| db.rows::<(Option<i32>, Option<TimestampWithTimeZone>, Option<i64>, bool)>(FRONT, &args))
    })?;
    let Some((priority, available_at, id, keyed)) = found.into_iter().next() else {
        return Ok(());
    };
    let first = match (priority, available_at, id) {
        (Some(priority), Some(available_at), Some(id)) => Key { priority, available_at: available_at.into(), id },
        _ => Key::TOP,
    };
    front::install(queue_name, seen, first, keyed, look_from == Key::BOTTOM, now.into());
    Ok(())
}

/// The claim statement: `claim.sql` between its parts, or (`lean`) the statement made from it
/// without the fairness check, as that file's header describes.
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
    static KEYED: LazyLock<(String, String)> = LazyLock::new(|| {
        let starvation = without_sections(self::KEYED, "fairness");
        (without_sections(&starvation, "key starvation"), starvation)
    });
    (KEYED.0.as_str(), KEYED.1.as_str())
}

/// `sql` without its lines from each `-- <name>: begin` to the next `-- <name>: end`, and with the
/// text of each `-- lean: ` line instead.
fn without_sections(sql: &str, name: &str) -> String {
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

/// A claimed job's place in claim order.
fn key_of(job: &ClaimedJob, order: &ClaimOrder) -> Key {
    Key { priority: job.3, available_at: order.2, id: job.0 }
}

/// A time as a timestamptz argument; the front's keys are times read from jq_jobs, or infinite.
fn timestamp(at: pg_sys::TimestampTz) -> TimestampWithTimeZone {
    TimestampWithTimeZone::try_from(at).unwrap_or_else(|_| TimestampWithTimeZone::negative_infinity())
}

/// Claim order as a sort key: starving jobs first, oldest first; then `priority DESC, available_at, id`.
type ClaimOrder = (bool, std::cmp::Reverse<i32>, pg_sys::TimestampTz, i64);

/// The claimed rows: the job's columns, then its `available_at` and whether it was starving.
type ClaimedRow = (
    i64,
    String,
    Payload,
    i32,
    i32,
    i32,
    i64,
    TimestampWithTimeZone,
    TimestampWithTimeZone,
    bool,
    Option<String>,
    Option<TimestampWithTimeZone>,
    Option<i64>,
);

/// What a claim's fairness check saw, for the queue's fairness bound: the oldest pending job
/// (None: none) and the starvation limit (None: none), in microseconds.
type FairnessSeen = (Option<i64>, Option<i64>);

/// What one turn of a claim took: the jobs without a key and what their fairness check saw (as
/// `Claimed`), then the jobs with a key.
type Taken = (Vec<(ClaimedJob, ClaimOrder)>, Option<FairnessSeen>, Vec<(ClaimedJob, ClaimOrder)>);

/// The jobs a claim statement took, each with its place in claim order, and what its fairness
/// check saw (None: it had none, or took nothing).
type Claimed = (Vec<(ClaimedJob, ClaimOrder)>, Option<FairnessSeen>);

/// Runs the claim statement: the lean one while the queue's fairness bound says no job can be
/// starving (`fair`), otherwise the whole of `claim.sql`, whose fairness check is then returned as well.
fn claim_rows(db: &mut Session, args: &[DatumWithOid], fair: bool) -> spi::Result<Claimed> {
    let rows: Vec<ClaimedRow> = db.rows(statement(fair), args)?;
    let seen = rows.first().filter(|_| !fair).map(|row| (row.11.map(pg_sys::TimestampTz::from), row.12));
    Ok((rows.into_iter().map(claimed_job).collect(), seen))
}

/// A claimed row as the job jq_claim returns and its place in claim order.
fn claimed_job(row: ClaimedRow) -> (ClaimedJob, ClaimOrder) {
    let (id, queue, payload, priority, attempts, max_attempts, token, expires, available_at, starved, ..) = row;
    let rank = if starved { 0 } else { priority };
    let order = (!starved, std::cmp::Reverse(rank), available_at.into(), id);
    ((id, queue, payload, priority, attempts, max_attempts, token, expires), order)
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

    #[test]
    #[should_panic(expected = "has no end")]
    fn an_unended_fairness_section_is_refused() {
        without_sections("SELECT 1\n-- fairness: begin\n, 2\n", "fairness");
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn claim_follows_priority_then_available_at_then_id() {
        let low = one::<i64>("SELECT jq_enqueue('q', '{}', priority => 1)");
        let high_late =
            one::<i64>("SELECT jq_enqueue('q', '{}', priority => 9, run_at => clock_timestamp() - interval '1 s')");
        let high_early =
            one::<i64>("SELECT jq_enqueue('q', '{}', priority => 9, run_at => clock_timestamp() - interval '1 h')");
        let high_early_2 = one::<i64>("SELECT jq_enqueue('q', '{}', priority => 9, run_at => (SELECT available_at FROM jq_jobs WHERE id = currval('jq_jobs_id_seq')))");
        let order: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT id FROM jq_claim('q', 'w', batch_size => 10)", None, &[])
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        assert_eq!(order, vec![high_early, high_early_2, high_late, low]);
    }

    #[pg_test]
    fn claim_batch_changes_exactly_the_rows_it_returns() {
        run("SELECT jq_enqueue_batch('q', array_fill('{}'::jsonb, ARRAY[5]))");
        let returned: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT id FROM jq_claim('q', 'w', batch_size => 3)", None, &[])
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        let running: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT id FROM jq_jobs WHERE status = 'running' ORDER BY id", None, &[])
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        let mut sorted = returned.clone();
        sorted.sort();
        assert_eq!(returned.len(), 3);
        assert_eq!(sorted, running);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_claim('q', 'w', batch_size => 10)"), 2);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_claim('q', 'w', batch_size => 10)"), 0);
    }

    #[pg_test]
    fn claim_sets_the_lease_and_increments_token_and_attempts() {
        let id = enqueue("q");
        assert!(one::<bool>(&format!(
            "SELECT c.id = {id} AND c.attempt_count = 1 AND c.lease_token = 1
                AND c.lease_expires_at BETWEEN clock_timestamp() + interval '59 s' AND clock_timestamp() + interval '60 s'
             FROM jq_claim('q', 'w1') c"
        )));
        assert!(one::<bool>(&format!(
            "SELECT status = 'running' AND lease_owner = 'w1' AND attempt_count = 1 AND lease_token = 1
             FROM jq_jobs WHERE id = {id}"
        )));
    }

    #[pg_test]
    fn claim_uses_the_queue_default_lease_when_none_given() {
        run("INSERT INTO jq_queues (queue_name, default_lease) VALUES ('slow', '10 minutes')");
        enqueue("slow");
        assert!(one::<bool>(
            "SELECT lease_expires_at > clock_timestamp() + interval '9 minutes' FROM jq_claim('slow', 'w')"
        ));
    }

    #[pg_test]
    fn claim_returns_nothing_from_an_empty_or_paused_queue() {
        assert_eq!(claim("empty", "w", "30 s"), None);
        run("INSERT INTO jq_queues (queue_name, paused) VALUES ('p', true)");
        let id = enqueue("p");
        assert_eq!(claim("p", "w", "30 s"), None);
        assert_eq!(status(id), "pending");
        run("UPDATE jq_queues SET paused = false WHERE queue_name = 'p'");
        assert_eq!(claim("p", "w", "30 s").map(|c| c.0), Some(id));
    }

    #[pg_test]
    fn ordering_key_runs_a_key_one_at_a_time_in_id_order() {
        let a1 = one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'a')");
        let a2 = one::<i64>("SELECT jq_enqueue('q', '{}', priority => 10, ordering_key => 'a')");
        let free = enqueue("q");
        let claimed: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT id FROM jq_claim('q', 'w', batch_size => 10) ORDER BY id", None, &[])
                .unwrap()
                .map(|r| r.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        assert_eq!(claimed, vec![a1, free], "a2 waits behind a1 despite its priority");
        let token = one::<i64>(&format!("SELECT lease_token FROM jq_jobs WHERE id = {a1}"));
        assert!(complete(a1, "w", token));
        assert_eq!(claim("q", "w", "30 s").map(|c| c.0), Some(a2));
    }

    /// Collects the ids a query returns, in its order.
    fn ids(sql: &str) -> Vec<i64> {
        Spi::connect(|c| c.select(sql, None, &[]).unwrap().map(|r| r.get::<i64>(1).unwrap().unwrap()).collect())
    }

    /// Our choice for ordering keys: a dead or cancelled job no longer holds its key, so the jobs
    /// behind it run. A pending head with a future run_at does hold it.
    #[pg_test]
    fn ordering_key_dead_or_cancelled_heads_let_the_rest_pass() {
        let dead = one::<i64>("SELECT jq_enqueue('q', '{}', max_attempts => 1, ordering_key => 'k')");
        let cancelled = one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'k')");
        let third = one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'k')");
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert!(one::<bool>(&format!("SELECT jq_fail({dead}, 'w', {token}, 'E', retryable => false)")));
        assert!(one::<bool>(&format!("SELECT jq_cancel({cancelled})")));
        assert_eq!(claim("q", "w", "30 s").map(|c| c.0), Some(third));
    }

    #[pg_test]
    fn ordering_key_head_with_a_future_run_at_holds_the_key() {
        one::<i64>(
            "SELECT jq_enqueue('q', '{}', run_at => clock_timestamp() + interval '1 hour', ordering_key => 'k')",
        );
        one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'k')");
        let other = one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'other')");
        assert_eq!(ids("SELECT id FROM jq_claim('q', 'w', batch_size => 10)"), vec![other]);
    }

    #[pg_test]
    fn ordering_key_redriven_head_waits_for_the_running_job_then_goes_first() {
        let first = one::<i64>("SELECT jq_enqueue('q', '{}', max_attempts => 1, ordering_key => 'k')");
        let second = one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'k')");
        one::<i64>("SELECT jq_enqueue('q', '{}', ordering_key => 'k')");
        let (_, t1) = claim("q", "w", "30 s").unwrap();
        assert!(one::<bool>(&format!("SELECT jq_fail({first}, 'w', {t1}, 'E', retryable => false)")));
        let (running, t2) = claim("q", "w", "30 s").unwrap();
        assert_eq!(running, second);
        assert!(one::<bool>(&format!("SELECT jq_retry({first})")));
        assert_eq!(claim("q", "w", "30 s"), None, "the re-driven head waits while `second` runs");
        assert!(complete(second, "w", t2));
        assert_eq!(claim("q", "w", "30 s").map(|c| c.0), Some(first));
        assert_eq!(claim("q", "w", "30 s"), None, "the third job waits for the re-driven head");
    }

    #[pg_test]
    fn concurrency_limit_caps_running_jobs_of_the_queue() {
        run("INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('lim', 2)");
        run("SELECT jq_enqueue_batch('lim', array_fill('{}'::jsonb, ARRAY[5]))");
        let first = ids("SELECT id FROM jq_claim('lim', 'w', batch_size => 5)");
        assert_eq!(first.len(), 2);
        assert_eq!(ids("SELECT id FROM jq_claim('lim', 'w')").len(), 0);
        let token = one::<i64>(&format!("SELECT lease_token FROM jq_jobs WHERE id = {}", first[0]));
        assert!(complete(first[0], "w", token));
        assert_eq!(ids("SELECT id FROM jq_claim('lim', 'w', batch_size => 5)").len(), 1);
        run("UPDATE jq_queues SET concurrency_limit = NULL WHERE queue_name = 'lim'");
        assert_eq!(ids("SELECT id FROM jq_claim('lim', 'w', batch_size => 5)").len(), 2);
    }

    #[pg_test]
    fn an_expired_but_unreaped_job_still_takes_a_slot() {
        run("SET LOCAL pg_jobqueue.inline_reap_max = 0");
        run("INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('lim', 1)");
        run("SELECT jq_enqueue_batch('lim', array_fill('{}'::jsonb, ARRAY[2]))");
        claim("lim", "w", "1 second").unwrap();
        sleep(1.1);
        assert_eq!(claim("lim", "w", "30 s"), None);
        assert_eq!(one::<i32>("SELECT jq_reap()"), 1);
        run("UPDATE jq_live_jobs SET available_at = clock_timestamp() WHERE status = 'pending'");
        assert!(claim("lim", "w", "30 s").is_some());
    }

    #[pg_test]
    fn a_starving_job_is_claimed_before_fresher_higher_priorities() {
        run("INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('f', '1 minute')");
        let fresh_high = one::<i64>("SELECT jq_enqueue('f', '{}', priority => 100)");
        let waiting_low =
            one::<i64>("SELECT jq_enqueue('f', '{}', priority => -5, run_at => clock_timestamp() - interval '30 s')");
        let starving_low = one::<i64>(
            "SELECT jq_enqueue('f', '{}', priority => -10, run_at => clock_timestamp() - interval '2 minutes')",
        );
        assert_eq!(
            ids("SELECT id FROM jq_claim('f', 'w', batch_size => 10)"),
            vec![starving_low, fresh_high, waiting_low],
            "the starving job first, then strict priority"
        );
    }

    /// Among starving jobs, age decides, not priority: under overload a queue degrades to arrival
    /// order for its old jobs, so a low priority cannot starve behind starving higher ones. The
    /// fairness check reads each priority's oldest jobs apart; this takes the oldest of all.
    #[pg_test]
    fn starving_jobs_are_claimed_oldest_first_whatever_their_priority() {
        run("INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('o', '1 minute')");
        let fresh = one::<i64>("SELECT jq_enqueue('o', '{}', priority => 9)");
        let starving_high = one::<i64>(
            "SELECT jq_enqueue('o', '{}', priority => 5, run_at => clock_timestamp() - interval '3 minutes')",
        );
        let starving_low = one::<i64>(
            "SELECT jq_enqueue('o', '{}', priority => 1, run_at => clock_timestamp() - interval '10 minutes')",
        );
        let starving_mid = one::<i64>(
            "SELECT jq_enqueue('o', '{}', priority => 3, run_at => clock_timestamp() - interval '5 minutes')",
        );
        assert_eq!(ids("SELECT id FROM jq_claim('o', 'w')"), vec![starving_low]);
        assert_eq!(
            ids("SELECT id FROM jq_claim('o', 'w', batch_size => 10)"),
            vec![starving_mid, starving_high, fresh],
            "the starving jobs by age, then claim order"
        );
    }

    #[pg_test]
    fn without_a_starvation_limit_priority_is_strict() {
        run("INSERT INTO jq_queues (queue_name, starvation_limit) VALUES ('s', NULL)");
        let high = one::<i64>("SELECT jq_enqueue('s', '{}', priority => 1)");
        let old_low = one::<i64>("SELECT jq_enqueue('s', '{}', run_at => clock_timestamp() - interval '1 day')");
        assert_eq!(ids("SELECT id FROM jq_claim('s', 'w', batch_size => 10)"), vec![high, old_low]);
    }

    #[pg_test]
    fn a_setting_change_applies_to_the_next_claim_not_the_running_job() {
        run("INSERT INTO jq_queues (queue_name, max_runtime) VALUES ('m', '90 seconds')");
        let id = enqueue("m");
        let (_, token) = claim("m", "w", "30 s").unwrap();
        run("UPDATE jq_queues SET max_runtime = '1 hour', default_lease = '10 minutes' WHERE queue_name = 'm'");
        assert!(one::<bool>(&format!("SELECT jq_heartbeat({id}, 'w', {token}, interval '10 minutes')")));
        assert!(one::<bool>(&format!(
            "SELECT lease_expires_at = claimed_at + interval '90 s' FROM jq_jobs WHERE id = {id}"
        )));
        enqueue("m");
        assert!(one::<bool>(
            "SELECT lease_expires_at > clock_timestamp() + interval '9 minutes' FROM jq_claim('m', 'w')"
        ));
    }
}
