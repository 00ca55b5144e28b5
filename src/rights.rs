//! Who may do what (guide, "Security").
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

use crate::{db, error};

const GRANTED: &str = include_str!("../sql/queries/rights_granted.sql");
const EXTENSION_OWNER: &str = include_str!("../sql/queries/extension_owner.sql");
const GRANTED_ANYWHERE: &str = include_str!("../sql/queries/rights_anywhere.sql");
const LIVE_JOBS_QUEUES: &str = include_str!("../sql/queries/job_queues_live.sql");
const JOBS_QUEUES: &str = include_str!("../sql/queries/job_queues_any.sql");
/// The key under which `holds_anywhere` caches its answer among the queues' (no queue is unnamed).
const ANYWHERE: &str = "";

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
    /// Whether the installed SQL definitions are of another version than this library (read with
    /// OWNER): their tables are not the ones it reads, so the job functions refuse until the update.
    static OUTDATED: Cell<bool> = const { Cell::new(false) };
    static CALLBACKS_REGISTERED: Cell<bool> = const { Cell::new(false) };
    /// The caller, while `as_owner` runs a call with the owner's rights.
    static SWITCHED_FROM: Cell<Option<pg_sys::Oid>> = const { Cell::new(None) };
}

/// The role whose rights a call uses: the current user when the call began, also while the call
/// runs as the owner.
pub fn caller() -> pg_sys::Oid {
    // SAFETY: a plain read of the current user.
    SWITCHED_FROM.get().unwrap_or_else(|| unsafe { pg_sys::GetUserId() })
}

/// Raises 42501 unless the caller holds `privilege` on `queue_name`. Rights changed elsewhere
/// apply from this call on, in a transaction that called before they changed too (see
/// `accept_invalidations`).
pub fn require(queue_name: &str, privilege: Privilege) {
    accept_invalidations();
    if !enforced() {
        return;
    }
    if !holds(caller(), queue_name, privilege) {
        error::permission_denied(queue_name, privilege.name());
    }
}

/// The jobs of `job_ids`, each with its queue, on which the caller holds one of `privileges`,
/// found before the verb touches, locks or writes any of them; None for a caller that holds every
/// right (a superuser or the owner), for whom nothing is looked up. A job of a queue the caller may
/// not use is left out exactly as a job that does not exist is, so a refusal tells nothing of
/// another queue's jobs (not even that they exist); the verb then answers as for an unknown job. A
/// caller that holds none of `privileges` on any queue is refused with 42501 whatever it names.
pub fn usable_jobs(job_ids: &[i64], privileges: &[Privilege]) -> Option<Vec<(i64, String)>> {
    accept_invalidations();
    let role = caller();
    if !enforced() || holds_all(role) {
        return None;
    }
    let found = as_owner(|| db::connect(|db| queues_of(db, job_ids))).expect("the jobs' queues are readable");
    let usable: Vec<(i64, String)> = found
        .into_iter()
        .filter(|(_, queue_name)| privileges.iter().any(|privilege| holds(role, queue_name, *privilege)))
        .collect();
    // `found` may be empty because the jobs do not exist: refused the same as jobs of other queues.
    if usable.is_empty() {
        refuse_unless_held_anywhere(role, privileges);
    }
    Some(usable)
}

/// The queues of the jobs: in the live table first, by its primary key (where the jobs a verb acts
/// on are), then in the history as well for those not found there (a finished job, which the verbs
/// answer and count as they would for the owner).
fn queues_of(db: &mut db::Session, job_ids: &[i64]) -> pgrx::spi::Result<Vec<(i64, String)>> {
    let mut found = db.rows::<(i64, String)>(LIVE_JOBS_QUEUES, &[job_ids.to_vec().into()])?;
    if found.len() < job_ids.len() {
        let missing: Vec<i64> = job_ids.iter().copied().filter(|id| !found.iter().any(|(f, _)| f == id)).collect();
        found.extend(db.rows::<(i64, String)>(JOBS_QUEUES, &[missing.into()])?);
    }
    Ok(found)
}

/// Whether the caller holds one of `privileges` on `queue_name`, for a verb that names something
/// of a queue (a schedule) rather than the queue: false is answered as for something that does not
/// exist, and a caller that holds none of `privileges` on any queue is refused with 42501.
pub fn may_use(queue_name: &str, privileges: &[Privilege]) -> bool {
    accept_invalidations();
    let role = caller();
    if !enforced() || holds_all(role) || privileges.iter().any(|privilege| holds(role, queue_name, *privilege)) {
        return true;
    }
    refuse_unless_held_anywhere(role, privileges);
    false
}

/// Raises 42501 unless the caller holds one of `privileges` on some queue: for a verb whose
/// target was not found, refused as one of a queue the caller may not use would be.
pub fn require_somewhere(privileges: &[Privilege]) {
    accept_invalidations();
    let role = caller();
    if enforced() && !holds_all(role) {
        refuse_unless_held_anywhere(role, privileges);
    }
}

fn refuse_unless_held_anywhere(role: pg_sys::Oid, privileges: &[Privilege]) {
    if !privileges.iter().any(|privilege| holds_anywhere(role, *privilege)) {
        error::permission_denied_anywhere(privileges[0].name());
    }
}

/// Takes in the invalidations other sessions committed (a change of jq_grants or of a role, or of
/// the settings), which make this one forget what it cached: PostgreSQL takes them in at each
/// transaction's start and at each new lock, and a verb in a transaction that already holds its
/// locks takes none, so a right revoked meanwhile would still be honoured once, and a call that
/// waits would ask about rights as they were when it began. Every entry point of the rights checks
/// calls it first; nearly free when there are none.
pub fn accept_invalidations() {
    // SAFETY: what PostgreSQL does whenever it takes a lock; the callbacks it runs only drop caches.
    unsafe { pg_sys::AcceptInvalidationMessages() };
}

/// Whether `role` holds `privilege` on some queue (by a grant of its own or of a role whose
/// privileges it inherits).
fn holds_anywhere(role: pg_sys::Oid, privilege: Privilege) -> bool {
    let key = (role.to_u32(), privilege);
    let known = ANSWERS.with(|answers| answers.borrow().get(&key).and_then(|queues| queues.get(ANYWHERE)).copied());
    if let Some(known) = known {
        return known;
    }
    let privileges = vec![privilege.name()];
    let granted = as_owner(|| db::connect(|db| db.first::<bool>(GRANTED_ANYWHERE, &[role.into(), privileges.into()])))
        .expect("the rights lookup runs")
        .unwrap_or(false);
    remember(key, ANYWHERE, granted);
    granted
}

fn remember(key: (u32, Privilege), queue_name: &str, granted: bool) {
    ANSWERS.with(|answers| {
        let mut answers = answers.borrow_mut();
        let queues = answers.entry(key).or_default();
        if queues.len() >= CACHE_LIMIT {
            queues.clear();
        }
        queues.insert(queue_name.to_owned(), granted);
    });
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
        db::connect(|db| db.first::<bool>(GRANTED, &[role.into(), queue_name.into(), privilege.name().into()]))
    })
    .expect("the rights lookup runs")
    .unwrap_or(false);
    remember(key, queue_name, granted);
    granted
}

/// Whether the caller may read the queue's figures: any right on it, or membership in pg_monitor.
pub fn may_see(queue_name: &str) -> bool {
    let role = caller();
    !enforced()
        || holds_all(role)
        // SAFETY: a catalog lookup of two role oids.
        || unsafe { pg_sys::has_privs_of_role(role, PG_MONITOR) }
        || [Privilege::Monitor, Privilege::Manage, Privilege::Consume, Privilege::Enqueue]
            .into_iter()
            .any(|privilege| holds(role, queue_name, privilege))
}

/// Superusers and the owner (and roles that inherit the owner's privileges) hold every right.
fn holds_all(role: pg_sys::Oid) -> bool {
    // SAFETY: catalog lookups of role oids.
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

/// Whether the installed SQL definitions are of another version than this library: until ALTER
/// EXTENSION UPDATE, the job functions refuse (see `as_owner`) and the background worker waits.
pub fn outdated() -> bool {
    extension();
    OUTDATED.get()
}

fn extension() -> (pg_sys::Oid, bool) {
    if let Some(known) = OWNER.get() {
        return known;
    }
    register_invalidation_callbacks();
    type Extension = (pg_sys::Oid, Option<bool>, Option<pg_sys::Oid>, String);
    let rows = db::read_only_rows::<Extension>(EXTENSION_OWNER, &[]).expect("pg_extension is readable");
    let (owner, legacy, grants, version) =
        rows.into_iter().next().expect("the extension is installed in this database");
    GRANTS_OID.set(grants);
    OUTDATED.set(version != env!("CARGO_PKG_VERSION"));
    let known = (owner, legacy.unwrap_or(false));
    OWNER.set(Some(known));
    known
}

/// Runs `f` with the rights of the extension's owner, and switches back however it ends (an error
/// unwinds through the guard; an aborted transaction would restore the caller as well).
///
/// SECURITY_LOCAL_USERID_CHANGE, as SECURITY DEFINER sets it: no SET ROLE or SET SESSION
/// AUTHORIZATION can run inside, so nothing that runs as the owner can make itself another role.
///
/// SQL definitions of another version (until `ALTER EXTENSION pg_jobqueue UPDATE`) have the storage of
/// their release, which this library cannot serve: every function that reads or writes jobs runs
/// here, so each refuses until the update (guide, "Upgrading").
pub fn as_owner<R>(f: impl FnOnce() -> R) -> R {
    if !enforced() || outdated() {
        crate::error::update_needed();
    }
    let _restore = SwitchedUser::to(owner());
    f()
}

/// Runs `f` as `role` (the owner, read before), as `as_owner` runs it, whatever the version of the
/// installed definitions: for `DROP EXTENSION` (src/api/rights.rs), which works in every database.
pub fn as_role<R>(role: pg_sys::Oid, f: impl FnOnce() -> R) -> R {
    let _restore = SwitchedUser::to(role);
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
        // SAFETY: saves the current user and security context, then switches as SECURITY DEFINER
        // does; the drop below restores both.
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
        // SAFETY: restores what `to` saved.
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
    // SAFETY: registers callbacks for the life of the backend, once; they take no argument.
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(Some(relation_changed), pg_sys::Datum::from(0));
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::AUTHMEMROLEMEM as i32,
            Some(roles_changed),
            pg_sys::Datum::from(0),
        );
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::AUTHOID as i32,
            Some(roles_changed),
            pg_sys::Datum::from(0),
        );
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
