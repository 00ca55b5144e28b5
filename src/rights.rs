//! Who may do what (README, "Security").
//!
//! The `jq_*` functions are the only door to the queue: no client needs a right on the tables. Each
//! function checks its caller's right on the queue it acts on, then runs its statements with the
//! rights of the extension's owner (`as_owner`). That is what SECURITY DEFINER gives, with one
//! difference that matters here: a SECURITY DEFINER function cannot tell who called it, and a
//! check of the session's role instead would hand a queue right to any SECURITY DEFINER code that
//! the session's role happens to run. So the functions are declared SECURITY INVOKER, read their
//! caller (`GetUserId`, which is the owner of a calling SECURITY DEFINER function, as for any
//! right in PostgreSQL), check, and then switch.
//!
//! Rights are rows of `jq_grants`: a role, a queue name or a prefix pattern (`billing.*`, `*`), and
//! one of the privileges below. The owner and superusers hold every right. Members of a granted
//! role hold its rights if they inherit its privileges. Answers are cached per session and the
//! cache is dropped whenever `jq_grants` or a role membership changes, in any session (relcache and
//! syscache invalidations, sent at commit).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

const GRANTED: &str = include_str!("../sql/queries/rights_granted.sql");
const EXTENSION_OWNER: &str = include_str!("../sql/queries/extension_owner.sql");

/// The built-in pg_monitor role, which reads every queue's figures.
const PG_MONITOR: pg_sys::Oid = pg_sys::Oid::from_u32(3373);
/// Cached answers of one role and privilege beyond this many are dropped all at once: a session
/// rarely asks about many queues.
const CACHE_LIMIT: usize = 10_000;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Privilege {
    /// jq_enqueue, jq_enqueue_batch.
    Enqueue,
    /// jq_claim, jq_heartbeat, jq_complete, jq_complete_batch, jq_fail.
    Consume,
    /// Queue settings, pause, cancel, retry, purge; reading the queue's jobs.
    Manage,
    /// The queue's figures only.
    Monitor,
}

impl Privilege {
    pub fn name(self) -> &'static str {
        match self {
            Privilege::Enqueue => "enqueue",
            Privilege::Consume => "consume",
            Privilege::Manage => "manage",
            Privilege::Monitor => "monitor",
        }
    }
}

thread_local! {
    /// (role, privilege) -> queue -> allowed, keyed so that a cached answer is found without
    /// allocating (claims and completions ask on every call). A backend is one thread.
    static ANSWERS: RefCell<HashMap<(u32, Privilege), HashMap<String, bool>>> = RefCell::new(HashMap::new());
    /// The extension's owner in this database, and whether its SQL definitions predate the rights.
    static OWNER: Cell<Option<(pg_sys::Oid, bool)>> = const { Cell::new(None) };
    static CALLBACKS_REGISTERED: Cell<bool> = const { Cell::new(false) };
    /// The caller, while `as_owner` runs a call with the owner's rights.
    static SWITCHED_FROM: Cell<Option<pg_sys::Oid>> = const { Cell::new(None) };
}

/// The role whose rights a call uses: the current user when the call began, also while the call
/// runs as the owner.
pub fn caller() -> pg_sys::Oid {
    SWITCHED_FROM.get().unwrap_or_else(|| unsafe { pg_sys::GetUserId() })
}

/// Raises 42501 unless the caller holds `privilege` on `queue_name`.
pub fn require(queue_name: &str, privilege: Privilege) {
    if !enforced() {
        return;
    }
    if !holds(caller(), queue_name, privilege) {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!("permission denied: {} on queue \"{queue_name}\"", privilege.name()),
            format!("The queue's owner grants it with jq_grant(role, '{queue_name}', '{}').", privilege.name())
        );
    }
}

/// Whether `role` holds `privilege` on `queue_name`.
pub fn holds(role: pg_sys::Oid, queue_name: &str, privilege: Privilege) -> bool {
    if holds_all(role) {
        return true;
    }
    let key = (role.to_u32(), privilege);
    let known = ANSWERS.with(|answers| answers.borrow().get(&key).and_then(|queues| queues.get(queue_name)).copied());
    if let Some(known) = known {
        return known;
    }
    let granted = as_owner(|| {
        Spi::connect_mut(|client| {
            let rows = crate::plans::run(client, GRANTED, &[role.into(), queue_name.into(), privilege.name().into()])?;
            crate::spi_util::first_value::<bool>(rows)
        })
    })
    .expect("the rights lookup runs")
    .unwrap_or(false);
    ANSWERS.with(|answers| {
        let mut answers = answers.borrow_mut();
        let queues = answers.entry(key).or_default();
        if queues.len() >= CACHE_LIMIT {
            queues.clear();
        }
        queues.insert(queue_name.to_owned(), granted);
    });
    granted
}

/// Whether the caller may read the queue's figures: any right on it, or membership in pg_monitor.
pub fn may_see(queue_name: &str) -> bool {
    let role = caller();
    !enforced()
        || holds_all(role)
        || unsafe { pg_sys::has_privs_of_role(role, PG_MONITOR) }
        || [Privilege::Monitor, Privilege::Manage, Privilege::Consume, Privilege::Enqueue]
            .into_iter()
            .any(|privilege| holds(role, queue_name, privilege))
}

/// Superusers and the owner (and roles that inherit the owner's privileges) hold every right.
fn holds_all(role: pg_sys::Oid) -> bool {
    unsafe { pg_sys::superuser_arg(role) || pg_sys::has_privs_of_role(role, owner()) }
}

/// The owner of the extension in this database: the role whose rights the functions run with.
pub fn owner() -> pg_sys::Oid {
    extension().0
}

/// Whether rights are checked: the installed SQL definitions are of a version that has them.
pub fn enforced() -> bool {
    !extension().1
}

fn extension() -> (pg_sys::Oid, bool) {
    if let Some(known) = OWNER.get() {
        return known;
    }
    register_invalidation_callbacks();
    let known = Spi::connect(|client| {
        let row = client.select(EXTENSION_OWNER, Some(1), &[])?.first();
        Ok::<_, pgrx::spi::Error>((row.get::<pg_sys::Oid>(1)?, row.get::<bool>(2)?, row.get::<pg_sys::Oid>(3)?))
    })
    .expect("pg_extension is readable");
    GRANTS_OID.set(known.2);
    let known = (
        known.0.expect("the extension is installed in this database"),
        known.1.unwrap_or(false),
    );
    OWNER.set(Some(known));
    known
}

/// Runs `f` with the rights of the extension's owner, and switches back however it ends (an error
/// unwinds through the guard; an aborted transaction would restore the caller as well).
///
/// SECURITY_LOCAL_USERID_CHANGE, as SECURITY DEFINER sets it: no SET ROLE or SET SESSION
/// AUTHORIZATION can run inside, so nothing that runs as the owner can make itself another role.
pub fn as_owner<R>(f: impl FnOnce() -> R) -> R {
    if !enforced() {
        return f();
    }
    let _restore = SwitchedUser::to(owner());
    f()
}

struct SwitchedUser {
    user: pg_sys::Oid,
    context: i32,
    caller: Option<pg_sys::Oid>,
}

impl SwitchedUser {
    fn to(role: pg_sys::Oid) -> Self {
        let mut saved = SwitchedUser { user: pg_sys::InvalidOid, context: 0, caller: SWITCHED_FROM.get() };
        unsafe {
            pg_sys::GetUserIdAndSecContext(&mut saved.user, &mut saved.context);
            pg_sys::SetUserIdAndSecContext(role, saved.context | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32);
        }
        SWITCHED_FROM.set(Some(saved.caller.unwrap_or(saved.user)));
        saved
    }
}

impl Drop for SwitchedUser {
    fn drop(&mut self) {
        unsafe { pg_sys::SetUserIdAndSecContext(self.user, self.context) };
        SWITCHED_FROM.set(self.caller);
    }
}

/// Forget every cached answer and the owner: `jq_grants` changed (or the extension was dropped,
/// which drops it), or a role membership or attribute changed.
fn forget() {
    ANSWERS.with(|answers| answers.borrow_mut().clear());
    OWNER.set(None);
}

fn register_invalidation_callbacks() {
    if CALLBACKS_REGISTERED.get() {
        return;
    }
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(Some(relation_changed), pg_sys::Datum::from(0));
        pg_sys::CacheRegisterSyscacheCallback(pg_sys::SysCacheIdentifier::AUTHMEMROLEMEM as i32, Some(roles_changed), pg_sys::Datum::from(0));
        pg_sys::CacheRegisterSyscacheCallback(pg_sys::SysCacheIdentifier::AUTHOID as i32, Some(roles_changed), pg_sys::Datum::from(0));
    }
    CALLBACKS_REGISTERED.set(true);
}

/// jq_grants changed (its statement trigger sends an invalidation of it, in every session), or it
/// was dropped with the extension, or every relation was invalidated at once. While the table's oid
/// is not known, any invalidation may be of it.
#[pg_guard]
unsafe extern "C-unwind" fn relation_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    if relid == pg_sys::InvalidOid || GRANTS_OID.get().is_none_or(|grants| grants == relid) {
        forget();
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn roles_changed(_arg: pg_sys::Datum, _cache: i32, _hash: u32) {
    forget();
}

thread_local! {
    /// jq_grants' oid, read with the owner; None until then (then every invalidation forgets).
    static GRANTS_OID: Cell<Option<pg_sys::Oid>> = const { Cell::new(None) };
}

/// The statement trigger on jq_grants: tell every session (this one included, at the end of the
/// command) to drop its cached answers once this transaction commits.
#[pg_trigger]
fn jq_grants_changed<'a>(
    trigger: &'a pgrx::PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, pgrx::AllocatedByPostgres>>, pgrx::PgTriggerError> {
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(trigger.relation()?.oid()) };
    Ok(None)
}

extension_sql_file!("../sql/monitoring.sql", name = "monitoring", requires = [jq_can_see, jq_has_right]);

/// `jq_can_see(queue_name)`: the row filter of the figures views.
#[pg_extern(stable, parallel_safe, strict)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_can_see(queue_name: &str) -> bool {
    may_see(queue_name)
}

/// `jq_has_right(queue_name, privilege)`: whether the caller holds a right, for clients that want to ask
/// before they act (and for the views of jobs).
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_has_right(queue_name: Option<&str>, privilege: Option<&str>) -> bool {
    let queue_name = crate::input::queue_name(queue_name);
    let privilege = parse_privilege(privilege);
    holds(caller(), queue_name, privilege)
}

fn parse_privilege(value: Option<&str>) -> Privilege {
    match value.unwrap_or_else(|| crate::error::null_argument("privilege")) {
        "enqueue" => Privilege::Enqueue,
        "consume" => Privilege::Consume,
        "manage" => Privilege::Manage,
        "monitor" => Privilege::Monitor,
        _ => crate::error::invalid_argument("privilege", "must be one of enqueue, consume, manage, monitor"),
    }
}
