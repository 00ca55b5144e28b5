//! The waiting claim's loop (jq_claim's `wait`) and its hazards: a claim that sleeps must hold no
//! lock, no transaction id and, where it can, no snapshot horizon while it sleeps.
//!
//! A waiting claim sleeps between looks. It is woken by enqueue commits through shared memory when
//! the library is preloaded (and polls otherwise), wakes itself when the queue's next scheduled job
//! falls due, and looks again at least every `pg_jobqueue.wait_recheck`.

use std::time::{Duration, Instant};

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;
use pgrx::PgList;

use crate::db::{self, clock};
use crate::shared::wake;
use crate::{error, guc};

pub(crate) const NEXT_DUE: &str = concat!(
    include_str!("../../sql/queries/parts/pending_levels.sql"),
    include_str!("../../sql/queries/claim_next_due.sql")
);

/// What one look found, and when to look again at the latest besides the queue's next due job
/// (a rate window that opens then, guide "Flow control").
pub struct Look<T> {
    pub found: Vec<T>,
    pub again_at: Option<pg_sys::TimestampTz>,
}

impl<T> Look<T> {
    pub fn nothing_until(again_at: Option<pg_sys::TimestampTz>) -> Self {
        Look { found: Vec::new(), again_at }
    }
}

/// Refuses a wait outside READ COMMITTED, where every look would see the transaction's first
/// snapshot and no job enqueued since.
pub fn refuse_outside_read_committed() {
    if !db::read_committed() {
        error::wait_needs_read_committed();
    }
}

/// Looks (`look(now)`) until it finds something or `wait` is over, sleeping between looks until a
/// wake-up, the next due job, a recheck or the end of the wait. Returns what the last look found.
pub fn look_until_found<T>(
    queue_name: &str,
    wait: Duration,
    mut look: impl FnMut(TimestampWithTimeZone) -> spi::Result<Look<T>>,
) -> spi::Result<Vec<T>> {
    let deadline = Instant::now() + wait;
    let had_xid = holds_transaction_id();
    let may_release = may_release_snapshot_horizon();
    loop {
        // Read before looking, so that an enqueue committing after the look still wakes the sleep.
        let seen = wake::generation(queue_name);
        let Look { found, again_at } = look(clock::now())?;
        let left = deadline.saturating_duration_since(Instant::now());
        // A look that found nothing may still have written or locked: inline recovery reaped
        // leases whose jobs are not yet due again, or a limited queue's lock was taken and its free
        // slot lost to another claimer. Sleeping now would hold those rows and that lock, so
        // return, and let the statement commit them.
        let wrote = !had_xid && holds_transaction_id();
        if !found.is_empty() || left.is_zero() || wrote {
            return Ok(found);
        }
        let until_due = match (next_due(queue_name)?, again_at) {
            (due, None) => due,
            (due, Some(at)) => {
                let micros = (at - pg_sys::TimestampTz::from(clock::now())).max(0) as u64;
                Some(due.unwrap_or(Duration::MAX).min(Duration::from_micros(micros)))
            }
        };
        if may_release {
            release_snapshot_horizon();
        }
        // The recheck finds work no wake-up announces: an unpaused queue, a freed slot of a limited
        // queue, the end of a retry's backoff.
        let most = wake::longest_sleep(Duration::from_millis(guc::WAIT_RECHECK_MS.get() as u64));
        wake::sleep(queue_name, seen, left.min(most).min(until_due.unwrap_or(Duration::MAX)));
    }
}

fn holds_transaction_id() -> bool {
    // SAFETY: a plain read of the transaction state.
    unsafe { pg_sys::GetTopTransactionIdIfAny() != pg_sys::InvalidTransactionId }
}

/// How long until the queue's next scheduled job (run_at, backoff) becomes claimable, if it has one.
fn next_due(queue_name: &str) -> spi::Result<Option<Duration>> {
    let now = clock::now();
    let micros = db::connect(|db| db.first::<i64>(NEXT_DUE, &[queue_name.into(), now.into()]))?;
    Ok(micros.map(|m| Duration::from_micros(m.max(0) as u64)))
}

/// Whether a waiting call may let VACUUM clean up behind it while it sleeps
/// (`release_snapshot_horizon`). Decided once, when the call begins: nothing the call does opens a
/// portal or a transaction block.
///
/// The statement that called jq_claim keeps its snapshot registered until it ends, and with it
/// this backend's xmin, although a waiting claim reads nothing with that snapshot: each look takes
/// a fresh one (READ COMMITTED), which sets xmin again. Clearing the xmin for the sleep, as
/// PostgreSQL clears it between transactions, is safe only if nothing reads with an older snapshot
/// after the sleep: no snapshot but the statement's own may exist. So it is done only when the call
/// comes from the top-level statement itself (not from PL/pgSQL, a procedure, a DO block or an SQL
/// function, whose outer queries hold snapshots of their own), that statement reads no table and
/// computes nothing from the function's rows that could read one (`SELECT * FROM jq_claim(...)`;
/// a function of SQL, PL/pgSQL or C called on each row, a STABLE one reading with the statement's
/// snapshot, would read after the sleep), it runs outside a transaction block, and its portal is
/// the session's only one (no cursor, held or not, and no suspended portal of the extended
/// protocol). Anything else keeps its horizon while it sleeps, which is correct but holds back
/// VACUUM; the guide says so ("Wake-ups").
pub(crate) fn may_release_snapshot_horizon() -> bool {
    // SAFETY: reads of the transaction and portal state (see each function).
    unsafe {
        !pg_sys::IsTransactionBlock()
            && the_only_portal()
            && called_by_the_top_level_statement()
            && statement_reads_no_table()
            && statement_only_returns_the_rows()
    }
}

/// Whether the top-level statement is one scan of one function, whose rows it returns (and may
/// filter) with PostgreSQL's built-in functions only: nothing it evaluates after the function
/// returns can read with the statement's snapshot. jq-worker's claim (`payload::text`, `extract(...
/// clock_timestamp())`) qualifies; a function of SQL, PL/pgSQL or C called on each row, which may
/// read a table with that snapshot, does not, nor does a subquery.
unsafe fn statement_only_returns_the_rows() -> bool {
    // SAFETY: the active portal is checked for NULL; its statements, plans and their lists are
    // PostgreSQL nodes of the types checked before each cast.
    unsafe {
        let portal = pg_sys::ActivePortal;
        if portal.is_null() {
            return false;
        }
        let stmts = PgList::<pg_sys::Node>::from_pg((*portal).stmts);
        stmts.len() == 1
            && stmts.iter_ptr().all(|node| {
                if !pgrx::is_a(node, pg_sys::NodeTag::T_PlannedStmt) {
                    return false;
                }
                let plan = (*node.cast::<pg_sys::PlannedStmt>()).planTree;
                if plan.is_null() || !pgrx::is_a(plan.cast(), pg_sys::NodeTag::T_FunctionScan) {
                    return false;
                }
                let scan = plan.cast::<pg_sys::FunctionScan>();
                (*plan).initPlan.is_null()
                    && PgList::<pg_sys::Node>::from_pg((*scan).functions).len() == 1
                    && !may_read((*plan).targetlist.cast())
                    && !may_read((*plan).qual.cast())
            })
    }
}

/// The language of PostgreSQL's built-in functions (its oid in pg_language, the same in 15 and 18).
const INTERNAL_LANGUAGE: u32 = 12;

/// Whether an expression (or a list of them) calls a function that is not built into PostgreSQL,
/// or holds a subquery: either may read a table with the statement's snapshot.
unsafe fn may_read(node: *mut pg_sys::Node) -> bool {
    // SAFETY: a walk of a planned expression tree with PostgreSQL's own walker.
    unsafe { !node.is_null() && reads_walker(node, std::ptr::null_mut()) }
}

unsafe extern "C-unwind" fn reads_walker(node: *mut pg_sys::Node, context: *mut std::ffi::c_void) -> bool {
    // SAFETY: PostgreSQL's walker passes each node of a valid tree; the checks read its tag and the
    // catalog entry of each function it calls.
    unsafe {
        if node.is_null() {
            return false;
        }
        if pgrx::is_a(node, pg_sys::NodeTag::T_SubPlan)
            || pgrx::is_a(node, pg_sys::NodeTag::T_AlternativeSubPlan)
            || pgrx::is_a(node, pg_sys::NodeTag::T_SubLink)
            || pg_sys::check_functions_in_node(node, Some(not_built_in), context)
        {
            return true;
        }
        pg_sys::expression_tree_walker(node, Some(reads_walker), context)
    }
}

unsafe extern "C-unwind" fn not_built_in(function: pg_sys::Oid, _context: *mut std::ffi::c_void) -> bool {
    // SAFETY: a catalog cache lookup by oid; the tuple is read while held and released once.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::PROCOID as _, function.into());
        if tuple.is_null() {
            return true;
        }
        let language = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tuple)).prolang;
        pg_sys::ReleaseSysCache(tuple);
        language.to_u32() != INTERNAL_LANGUAGE
    }
}

/// Clears this backend's xmin for a sleep; only where `may_release_snapshot_horizon` said so.
pub(crate) fn release_snapshot_horizon() {
    // SAFETY: the write to this backend's own PGPROC xmin is what PostgreSQL does between
    // transactions; `may_release_snapshot_horizon` ensured no snapshot that needs it is in use.
    unsafe {
        pg_sys::InvalidateCatalogSnapshot();
        (*pg_sys::MyProc).xmin = pg_sys::InvalidTransactionId;
    }
}

/// Whether the active portal is the session's only one. Every portal keeps its memory in a context
/// of its own under PostgreSQL's portal context (and a holdable cursor its rows in another), so the
/// siblings of the active portal's context are the other portals. This walks that short list of
/// contexts rather than the portal table: PostgreSQL 15's `ThereAreNoReadyPortals` leaves its scan of
/// the table open when it finds a ready portal, and a scan left open on every sleep ends, after a
/// hundred, in an error that the abort itself repeats until the server restarts (see the test
/// `a_waiting_claim_beside_a_held_cursor_leaves_no_scan_open`).
unsafe fn the_only_portal() -> bool {
    // SAFETY: the active portal and its context are checked for NULL; memory contexts form a tree
    // whose links are valid while the contexts live, and the portal contexts outlive this call.
    unsafe {
        let portal = pg_sys::ActivePortal;
        if portal.is_null() || (*portal).portalContext.is_null() {
            return false;
        }
        let own = (*portal).portalContext;
        let portals = (*own).parent;
        if portals.is_null() {
            return false;
        }
        let mut context = (*portals).firstchild;
        while !context.is_null() {
            if context != own {
                return false;
            }
            context = (*context).nextchild;
        }
        true
    }
}

/// Whether this call runs in the executor of the top-level statement: the nearest executor memory
/// context above the current one is that statement's. A call from PL/pgSQL runs in an executor of
/// its SPI query, and one from an SQL function in that function's executor.
unsafe fn called_by_the_top_level_statement() -> bool {
    // SAFETY: the active portal and its query descriptor are checked for NULL before use; memory
    // contexts form a tree whose parents outlive their children, and each has a name.
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
    // SAFETY: the active portal is checked for NULL; its statement list and range tables are
    // PostgreSQL lists of the node types checked before each cast.
    unsafe {
        let portal = pg_sys::ActivePortal;
        if portal.is_null() {
            return false;
        }
        let stmts = PgList::<pg_sys::Node>::from_pg((*portal).stmts);
        let reads_none = stmts.iter_ptr().all(|node| {
            if !pgrx::is_a(node, pg_sys::NodeTag::T_PlannedStmt) {
                return false;
            }
            let rtable = PgList::<pg_sys::RangeTblEntry>::from_pg((*node.cast::<pg_sys::PlannedStmt>()).rtable);
            let reads_none = rtable.iter_ptr().all(|rte| (*rte).rtekind != pg_sys::RTEKind::RTE_RELATION);
            reads_none
        });
        reads_none
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn a_waiting_claim_returns_a_job_when_its_run_at_comes() {
        let id = one::<i64>("SELECT jq_enqueue('q', '{}', run_at => clock_timestamp() + interval '300 ms')");
        let (claimed, due) = Spi::get_two::<i64, bool>(
            "SELECT c.id, clock_timestamp() >= j.available_at
             FROM jq_claim('q', 'w', wait => interval '20 s') c JOIN jq_jobs j USING (id)",
        )
        .unwrap();
        assert_eq!(claimed, Some(id));
        assert_eq!(due, Some(true), "claimed before its run_at");
    }

    #[pg_test]
    fn a_waiting_claim_with_nothing_to_claim_returns_no_rows_after_its_wait() {
        let elapsed = one::<bool>(
            "WITH t0 AS MATERIALIZED (SELECT clock_timestamp() AS at),
                  c AS MATERIALIZED (SELECT count(*) AS n FROM jq_claim('q', 'w', wait => interval '300 ms'))
             SELECT c.n = 0 AND clock_timestamp() - t0.at >= interval '300 ms' FROM t0, c",
        );
        assert!(elapsed, "returned a job, or returned before its wait was over");
        // Zero means no wait: a plain claim.
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_claim('q', 'w', wait => interval '0')"), 0);
    }
}
