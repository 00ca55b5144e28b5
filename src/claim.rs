//! jq_claim: take claimable jobs under a lease.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use pgrx::datum::{DatumWithOid, Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi::{self, SpiClient};
use pgrx::{PgList, PgSqlErrorCode};

use crate::payload::Payload;
use crate::spi_util::first_value;
use crate::stats;
use crate::rights::{self, Privilege};
use crate::{clock, guc, input, plans, reap, reaper, wake};

const CLAIM: &str = include_str!("../sql/queries/claim.sql");
const ADMIT: &str = include_str!("../sql/queries/claim_admit.sql");
const RUNNING: &str = include_str!("../sql/queries/claim_running.sql");
const SLOT_FREE: &str = include_str!("../sql/queries/claim_slot_free.sql");
const NEXT_DUE: &str = include_str!("../sql/queries/claim_next_due.sql");

/// Without shared memory (not preloaded) a waiting claim can only poll, at most this long apart.
const POLL: Duration = Duration::from_millis(200);

/// One claimed job, in the column order of jq_claim's result.
type ClaimedJob = (i64, String, Payload, i32, i32, i32, i64, TimestampWithTimeZone);

/// Claims up to `batch_size` claimable jobs of the queue in one statement that never waits on a row
/// another claimer holds. Returns no rows when nothing is claimable, or, with a `wait`, when nothing
/// became claimable within it.
///
/// A waiting claim sleeps between looks. It is woken by enqueue commits through shared memory when
/// the library is preloaded (and polls every `POLL` otherwise), wakes itself when the queue's next
/// scheduled job falls due, and looks again at least every `pg_jobqueue.wait_recheck`. While it
/// sleeps it holds no lock and no snapshot horizon (see `release_snapshot_horizon`).
// pgrx reads the result columns from the signature, so the type is spelled out here.
#[allow(clippy::type_complexity)]
#[pg_extern(name = "jq_claim", volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_claim_wait(
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
    let Some(wait) = wait else {
        return rights::as_owner(|| claim_now(queue_name, worker, lease, batch_size, false, now)).map(into_result);
    };
    refuse_wait_outside_read_committed();
    rights::as_owner(|| claim_waiting(queue_name, worker, lease, batch_size, wait))
}

/// The loop of a waiting claim: look, and sleep until a wake-up, the next due job, a recheck or the
/// end of the wait.
fn claim_waiting(
    queue_name: &str,
    worker: &str,
    lease: Option<Interval>,
    batch_size: i32,
    wait: Duration,
) -> spi::Result<ClaimResult> {
    let deadline = Instant::now() + wait;
    let had_xid = holds_transaction_id();
    loop {
        // Read before looking, so that an enqueue committing after the look still wakes the sleep.
        let seen = wake::generation(queue_name);
        let jobs = claim_now(queue_name, worker, lease, batch_size, true, clock::now())?;
        let left = deadline.saturating_duration_since(Instant::now());
        // A look that claimed nothing may still have written or locked: inline recovery reaped
        // leases whose jobs are not yet due again, or a limited queue's lock was taken and its free
        // slot lost to another claimer. Sleeping now would hold those rows and that lock, so
        // return, and let the statement commit them.
        let wrote = !had_xid && holds_transaction_id();
        if !jobs.is_empty() || left.is_zero() || wrote {
            return Ok(into_result(jobs));
        }
        let until_due = next_due(queue_name)?;
        release_snapshot_horizon();
        // The recheck finds work no wake-up announces: an unpaused queue, a freed slot of a limited
        // queue, the end of a retry's backoff.
        let recheck = Duration::from_millis(guc::WAIT_RECHECK_MS.get() as u64);
        let most = if wake::shared() { recheck } else { recheck.min(POLL) };
        wake::sleep(queue_name, seen, left.min(most).min(until_due.unwrap_or(Duration::MAX)));
    }
}

fn holds_transaction_id() -> bool {
    unsafe { pg_sys::GetTopTransactionIdIfAny() != pg_sys::InvalidTransactionId }
}

/// jq_claim as 0.1.0 declared it, without `wait`: that SQL definition calls this symbol, and a new
/// library must serve it until `ALTER EXTENSION UPDATE` replaces the definition.
#[allow(clippy::type_complexity)]
#[pg_extern(sql = false, volatile, parallel_unsafe)]
fn jq_claim(
    queue_name: Option<&str>,
    worker: Option<&str>,
    lease: Option<Interval>,
    batch_size: Option<i32>,
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
    jq_claim_wait(queue_name, worker, lease, batch_size, None)
}

type ClaimResult = TableIterator<'static, ClaimedJob>;

fn into_result(jobs: Vec<ClaimedJob>) -> ClaimResult {
    TableIterator::new(jobs)
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
    recover_expired_leases(queue_name, now)?;
    let args = |batch_size: i32, admitted: bool| -> [DatumWithOid<'static>; 6] {
        [queue_name.into(), worker.into(), lease.into(), batch_size.into(), now.into(), admitted.into()]
    };
    let mut jobs = Spi::connect_mut(|client| {
        let jobs = claim_rows(client, &args(batch_size, false))?;
        if !jobs.is_empty() {
            return Ok(jobs);
        }
        if waiting && !first_value::<bool>(plans::run(client, SLOT_FREE, &[queue_name.into(), now.into()])?)?.unwrap_or(false) {
            return Ok(jobs);
        }
        // Taking the row lock is also the test for a limit: it returns no row for an unlimited queue.
        let Some(limit) = first_value::<i32>(plans::run(client, ADMIT, &[queue_name.into()])?)? else {
            return Ok(jobs);
        };
        let running = first_value::<i64>(plans::run(client, RUNNING, &[queue_name.into()])?)?.unwrap_or(0);
        let free = i64::from(limit) - running;
        if free <= 0 {
            return Ok(jobs);
        }
        claim_rows(client, &args(batch_size.min(free as i32), true))
    })?;
    jobs.sort_unstable_by_key(|(_, order)| *order);
    let now = pg_sys::TimestampTz::from(now);
    for (_, (_, _, available_at, _)) in &jobs {
        stats::claimed(queue_name, now - available_at);
    }
    Ok(jobs.into_iter().map(|(job, _)| job).collect())
}

/// In REPEATABLE READ or SERIALIZABLE every look would use the transaction's first snapshot, which
/// never shows a job enqueued later: such a wait could only time out.
fn refuse_wait_outside_read_committed() {
    if unsafe { pg_sys::XactIsoLevel } as u32 != pg_sys::XACT_READ_COMMITTED {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
            "jq_claim with a wait needs READ COMMITTED",
            "In REPEATABLE READ or SERIALIZABLE its snapshot would never show a job enqueued after it began."
        );
    }
}

/// How long until the queue's next scheduled job (run_at, backoff) becomes claimable, if it has one.
fn next_due(queue_name: &str) -> spi::Result<Option<Duration>> {
    let now = clock::now();
    let micros = Spi::connect_mut(|client| {
        first_value::<i64>(plans::run(client, NEXT_DUE, &[queue_name.into(), now.into()])?)
    })?;
    Ok(micros.map(|m| Duration::from_micros(m.max(0) as u64)))
}

/// Lets VACUUM clean up behind a sleeping claim. The statement that called jq_claim keeps its
/// snapshot registered until it ends, and with it this backend's xmin, although a waiting claim
/// reads nothing with that snapshot: each look takes a fresh one (READ COMMITTED), which sets xmin
/// again. So the xmin is cleared for the sleep, as PostgreSQL clears it between transactions.
///
/// That is safe only if nothing reads with an older snapshot after the sleep: no snapshot but the
/// statement's own may exist. So it is done only when the claim is called by the top-level
/// statement itself (not from PL/pgSQL, a procedure, a DO block or an SQL function, whose outer
/// queries hold snapshots of their own), that statement reads no table (`SELECT * FROM
/// jq_claim(...)` reads only the function's result), it runs outside a transaction block, and no
/// other portal (a cursor, or a suspended portal of the extended protocol) is open. Anything else
/// keeps its horizon while it sleeps, which is correct but holds back VACUUM; the README says so.
fn release_snapshot_horizon() {
    unsafe {
        if pg_sys::IsTransactionBlock()
            || !pg_sys::ThereAreNoReadyPortals()
            || !called_by_the_top_level_statement()
            || !statement_reads_no_table()
        {
            return;
        }
        pg_sys::InvalidateCatalogSnapshot();
        (*pg_sys::MyProc).xmin = pg_sys::InvalidTransactionId;
    }
}

/// Whether this call runs in the executor of the top-level statement: the nearest executor memory
/// context above the current one is that statement's. A call from PL/pgSQL runs in an executor of
/// its SPI query, and one from an SQL function in that function's executor.
unsafe fn called_by_the_top_level_statement() -> bool {
    unsafe {
        let portal = pg_sys::ActivePortal;
        if portal.is_null() || (*portal).queryDesc.is_null() || (*(*portal).queryDesc).estate.is_null() {
            return false;
        }
        let top = (*(*(*portal).queryDesc).estate).es_query_cxt;
        let mut context = pg_sys::CurrentMemoryContext;
        while !context.is_null() {
            if std::ffi::CStr::from_ptr((*context).name) == c"ExecutorState" {
                return context == top;
            }
            context = (*context).parent;
        }
        false
    }
}

/// Whether the portal running the current top-level statement scans no relation.
unsafe fn statement_reads_no_table() -> bool {
    let portal = unsafe { pg_sys::ActivePortal };
    if portal.is_null() {
        return false;
    }
    let stmts = unsafe { PgList::<pg_sys::Node>::from_pg((*portal).stmts) };
    let reads_none = stmts.iter_ptr().all(|node| unsafe {
        if !pgrx::is_a(node, pg_sys::NodeTag::T_PlannedStmt) {
            return false;
        }
        let stmt = node.cast::<pg_sys::PlannedStmt>();
        let rtable = PgList::<pg_sys::RangeTblEntry>::from_pg((*stmt).rtable);
        let reads_none = rtable.iter_ptr().all(|rte| (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION);
        reads_none
    });
    reads_none
}

/// Inline recovery, for deployments with neither the background reaper nor pg_cron: a claim first
/// reaps a few expired leases of its own queue, so a queue that has live workers always recovers.
/// Skipped where a background reaper serves the database, and done at most once per
/// `inline_reap_interval` per session and queue, which is all recovery needs.
fn recover_expired_leases(queue_name: &str, now: TimestampWithTimeZone) -> spi::Result<()> {
    let max = guc::INLINE_REAP_MAX.get();
    if max == 0 || reaper::serves_this_database() || !inline_reap_due(queue_name) {
        return Ok(());
    }
    reap::reap_expired(max, Some(queue_name), now).map(|_| ())
}

thread_local! {
    /// When this session last recovered each queue inline. A backend is one thread.
    static LAST_INLINE_REAP: RefCell<HashMap<String, Instant>> = RefCell::new(HashMap::new());
}

fn inline_reap_due(queue_name: &str) -> bool {
    let every = Duration::from_millis(guc::INLINE_REAP_INTERVAL_MS.get() as u64);
    LAST_INLINE_REAP.with(|last| {
        let mut last = last.borrow_mut();
        if last.get(queue_name).is_some_and(|at| at.elapsed() < every) {
            return false;
        }
        last.insert(queue_name.to_owned(), Instant::now());
        true
    })
}

fn claim_rows(client: &mut SpiClient, args: &[DatumWithOid]) -> spi::Result<Vec<(ClaimedJob, ClaimOrder)>> {
    plans::run(client, CLAIM, args)?.map(|row| decode_claimed(&row)).collect()
}

/// Claim order as a sort key: starving jobs first, oldest first; then `priority DESC, available_at, id`.
type ClaimOrder = (bool, std::cmp::Reverse<i32>, pg_sys::TimestampTz, i64);

fn decode_claimed(row: &spi::SpiHeapTupleData) -> spi::Result<(ClaimedJob, ClaimOrder)> {
    let id: i64 = required(row.get(1)?);
    let priority: i32 = required(row.get(4)?);
    let available_at: TimestampWithTimeZone = required(row.get(9)?);
    let starved: bool = required(row.get(10)?);
    let rank = if starved { 0 } else { priority };
    let job = (
        id,
        required(row.get(2)?),
        required(row.get(3)?),
        priority,
        required(row.get(5)?),
        required(row.get(6)?),
        required(row.get(7)?),
        required(row.get(8)?),
    );
    Ok((job, (!starved, std::cmp::Reverse(rank), available_at.into(), id)))
}

/// Every column the claim returns is NOT NULL for a running job (the table's constraints say so).
fn required<T>(value: Option<T>) -> T {
    value.expect("a claimed job's columns are not NULL")
}
