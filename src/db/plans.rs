//! Prepared plans for the statements on the hot path (enqueue, claim, heartbeat, complete, fail)
//! and the other guarded updates of one job (retry, cancel).
//!
//! Parsing and planning a claim cost more than running it: perf showed 45% of a claim + complete
//! cycle's CPU in the planner and another 15% in the parser. So each backend prepares each of these
//! statements once, keeps the plan for the session, and runs it with a generic plan. PostgreSQL's
//! plan cache would otherwise keep re-planning the claim: its LIMIT is a parameter, so the generic
//! plan's estimate always looks worse than a custom plan's, although the plan is the same. The plan
//! test (`generic_plans_use_their_indexes`, in `api::plans`) checks the generic plans of every statement here.
//!
//! The plan cache replans on its own after DDL, VACUUM or ANALYZE of a table the statement reads.
//! Beyond that, a session plan lives at most `PLAN_LIFETIME`: the planner sizes tables by their
//! current length, so a plan made while jq_jobs was nearly empty (where any index, or none, looks
//! as good as the right one) is replaced soon after the table grows, even where autovacuum is off.
//! That is one parse and plan per statement, session and second, where there used to be one per call.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use pgrx::datum::DatumWithOid;
use pgrx::pg_sys::{self, PgOid};
use pgrx::spi::{self, OwnedPreparedStatement, Query, SpiClient, SpiTupleTable};

const PLAN_LIFETIME: Duration = Duration::from_secs(1);

thread_local! {
    /// This session's plans and when each was prepared, keyed by the address of the statement's
    /// text (each is an `include_str!` constant). A backend is one thread.
    static PLANS: RefCell<HashMap<usize, (Instant, Rc<OwnedPreparedStatement>)>> = RefCell::new(HashMap::new());
}

/// Runs `sql` (a `'static` statement text) with its session plan, preparing it on first use.
pub(super) fn run<'conn>(
    client: &mut SpiClient<'conn>,
    sql: &'static str,
    args: &[DatumWithOid],
) -> spi::Result<SpiTupleTable<'conn>> {
    let plan = plan_for(client, sql, args)?;
    let _settings = ForceGenericPlan::new();
    // The plan was prepared as mutating, so it runs read-write with a fresh snapshot, and PostgreSQL
    // assigns a transaction id only when a row actually changes (see `db`).
    Query::execute(&*plan, client, None, args)
}

fn plan_for(client: &SpiClient, sql: &'static str, args: &[DatumWithOid]) -> spi::Result<Rc<OwnedPreparedStatement>> {
    let key = sql.as_ptr() as usize;
    let cached = PLANS.with(|plans| plans.borrow().get(&key).cloned());
    if let Some((prepared, plan)) = cached {
        if prepared.elapsed() < PLAN_LIFETIME {
            return Ok(plan);
        }
    }
    let types: Vec<PgOid> = args.iter().map(|arg| PgOid::from(arg.oid())).collect();
    let plan = Rc::new(client.prepare_mut(sql, &types)?.keep());
    // The plan replaced here is freed when its last user (an outer execution, if any) lets go.
    PLANS.with(|plans| plans.borrow_mut().insert(key, (Instant::now(), plan.clone())));
    Ok(plan)
}

/// The planner settings the session plans are made and run with, for the duration of one execution
/// and restored however it ends (an error unwinds through the drop):
/// - `plan_cache_mode = force_generic_plan`, as above;
/// - `enable_seqscan = off`: each of these statements has one right access path (an index, or the
///   ctids the claim just locked), but a plan made while jq_jobs is empty finds a sequential scan
///   cheaper, and a session plan outlives that moment. Only the planner reads this setting.
/// - `jit = off`: the planner adds a large cost to a sequential scan it was told to avoid, so a
///   statement that can only scan a small table (the token epochs, the queues' settings) looks
///   dearer than `jit_above_cost`, and with `jit` on, as it is by default, each execution would be
///   compiled: about 0.1 s of a session's first claim and completion each, for a statement that
///   runs in microseconds (the citizen test `a_new_session_compiles_none_of_its_statements`). The
///   planner writes that choice into the plan, so planning without it is enough.
///
/// The variables are set directly: that is all the settings' own assignment does, and it costs
/// nothing per call, unlike `set_config_option`.
struct ForceGenericPlan {
    plan_cache_mode: i32,
    enable_seqscan: bool,
    jit_enabled: bool,
}

impl ForceGenericPlan {
    fn new() -> Self {
        // SAFETY: a backend is single-threaded; these settings are plain variables the planner and
        // the plan cache read.
        unsafe {
            let saved = Self {
                plan_cache_mode: pg_sys::plan_cache_mode,
                enable_seqscan: pg_sys::enable_seqscan,
                jit_enabled: pg_sys::jit_enabled,
            };
            pg_sys::plan_cache_mode = pg_sys::PlanCacheMode::PLAN_CACHE_MODE_FORCE_GENERIC_PLAN as i32;
            pg_sys::enable_seqscan = false;
            pg_sys::jit_enabled = false;
            saved
        }
    }
}

impl Drop for ForceGenericPlan {
    fn drop(&mut self) {
        // SAFETY: as above.
        unsafe {
            pg_sys::plan_cache_mode = self.plan_cache_mode;
            pg_sys::enable_seqscan = self.enable_seqscan;
            pg_sys::jit_enabled = self.jit_enabled;
        }
    }
}
