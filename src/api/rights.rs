//! The SQL side of the rights (guide, "Security"): the figures views' row filter, the question a
//! client may ask before it acts (the trigger that makes every session forget its cached answers
//! when `jq_grants` changes is `settings::jq_table_changed`). jq_grant and jq_revoke are PL/pgSQL, in
//! `sql/schema/rights.sql`; the model itself is `crate::rights`.

use std::cell::RefCell;

use pgrx::prelude::*;

use crate::rights::{self, Privilege};
use crate::{db, error, input, version};

const SCHEMA_USAGE_RELEASE: &str = include_str!("../../sql/queries/schema_usage_release.sql");
const SCHEMA_USAGE_REVOKE: &str = include_str!("../../sql/queries/schema_usage_revoke.sql");

extension_sql_file!(
    "../../sql/schema/views.sql",
    name = "monitoring",
    requires = [jq_can_see, jq_has_right, jq_maintenance_status]
);

/// `jq_can_see(queue_name)`: the row filter of the figures views.
#[pg_extern(stable, parallel_safe, strict)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_can_see(queue_name: &str) -> bool {
    rights::may_see(queue_name)
}

/// `jq_has_right(queue_name, privilege)`: whether the caller holds a right, for clients that want to ask
/// before they act (and for the views of jobs).
#[pg_extern(stable, parallel_safe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_has_right(queue_name: Option<&str>, privilege: Option<&str>) -> bool {
    let queue_name = input::queue_name(queue_name);
    let privilege = parse_privilege(privilege);
    rights::holds(rights::caller(), queue_name, privilege)
}

/// What the `DROP EXTENSION` that started in this transaction takes back if pg_jobqueue is among
/// the extensions it drops: noted by `jq_extension_drop_starting` at the start of the statement,
/// while `jq_schema_usage` can still be read, and taken back by `object_access` as PostgreSQL drops
/// the extension itself, after its members (that table among them).
struct PendingRelease {
    transaction: u32,
    extension: pg_sys::Oid,
    owner: pg_sys::Oid,
    schema: pg_sys::Oid,
    roles: Vec<pg_sys::Oid>,
}

thread_local! {
    static PENDING_RELEASE: RefCell<Option<PendingRelease>> = const { RefCell::new(None) };
}

static mut PREV_OBJECT_ACCESS: pg_sys::object_access_hook_type = None;
static mut OBJECT_ACCESS_INSTALLED: bool = false;

/// Installs `object_access`, once per process, in a session that is about to drop pg_jobqueue
/// (`jq_extension_drop_starting`, before anything is dropped): not when the library loads, for an
/// object access hook is called on every object a backend creates, drops or looks up, and on
/// PostgreSQL 18 its mere presence makes each search path lookup run again (guide, "What
/// it costs your server"). Once installed it stays: a hook installed after it chains to it.
fn install_object_access() {
    // SAFETY: a backend is single-threaded; the hook chains to the one it replaces.
    unsafe {
        if OBJECT_ACCESS_INSTALLED {
            return;
        }
        PREV_OBJECT_ACCESS = pg_sys::object_access_hook;
        pg_sys::object_access_hook = Some(object_access);
        OBJECT_ACCESS_INSTALLED = true;
    }
}

/// `jq_extension_drop_starting()`: called by the event trigger `jq_extension_dropped`
/// (`sql/schema/rights.sql`) at the start of every `DROP EXTENSION` of the database. The schema
/// outlives the extension (one the DBA made for it, or public), so the USAGE on it that jq_grant
/// gave and the install gave pg_monitor, as `jq_schema_usage` records them, is to be taken back
/// when pg_jobqueue is among the extensions dropped. Which ones are dropped is known only as
/// PostgreSQL drops them: this notes what to take back, as the owner reads it, and
/// `object_access` takes it back when the extension itself goes, whether the statement was sent
/// by a client or run by a function. Definitions of another version than the library's keep
/// what they gave (guide, "Upgrading").
#[pg_extern(volatile)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_extension_drop_starting() {
    PENDING_RELEASE.with(|pending| pending.borrow_mut().take());
    if !rights::enforced() || rights::outdated() {
        return;
    }
    let owner = rights::owner();
    type Row = (pg_sys::Oid, pg_sys::Oid, pg_sys::Oid);
    let rows = rights::as_role(owner, || db::read_only_rows::<Row>(SCHEMA_USAGE_RELEASE, &[]))
        .expect("jq_schema_usage is readable by the owner");
    let Some(&(extension, schema, _)) = rows.first() else { return };
    install_object_access();
    let roles = rows.into_iter().map(|(_, _, role)| role).collect();
    let transaction = version::local_transaction_id();
    PENDING_RELEASE.with(|pending| {
        *pending.borrow_mut() = Some(PendingRelease { transaction, extension, owner, schema, roles });
    });
}

/// PostgreSQL's object access hook: as it drops an extension whose release
/// `jq_extension_drop_starting` noted in this transaction (pg_jobqueue, once every object of
/// it is gone and the schema still stands), the USAGE is taken back, as the owner, from those of
/// the roles that still exist (one dropped since, in the same transaction, has none left).
#[pg_guard]
unsafe extern "C-unwind" fn object_access(
    access: pg_sys::ObjectAccessType::Type,
    class_id: pg_sys::Oid,
    object_id: pg_sys::Oid,
    sub_id: std::ffi::c_int,
    arg: *mut std::ffi::c_void,
) {
    // SAFETY: the arguments PostgreSQL gave this hook, to the hook it replaced.
    unsafe {
        if let Some(prev) = PREV_OBJECT_ACCESS {
            prev(access, class_id, object_id, sub_id, arg);
        }
    }
    if access != pg_sys::ObjectAccessType::OAT_DROP || class_id != pg_sys::ExtensionRelationId {
        return;
    }
    let release = PENDING_RELEASE.with(|pending| {
        let mut pending = pending.borrow_mut();
        let ours = pending.as_ref().is_some_and(|release| {
            release.extension == object_id && release.transaction == version::local_transaction_id()
        });
        if ours {
            pending.take()
        } else {
            None
        }
    });
    if let Some(release) = release {
        rights::as_role(release.owner, || {
            let args = [release.schema.into(), release.roles.into()];
            for (statement,) in db::read_only_rows::<(String,)>(SCHEMA_USAGE_REVOKE, &args)? {
                db::rows_planned_per_call::<()>(&statement, &[])?;
            }
            Ok::<(), pgrx::spi::Error>(())
        })
        .expect("the schema's USAGE is taken back");
    }
}

fn parse_privilege(value: Option<&str>) -> Privilege {
    match value.unwrap_or_else(|| error::null_argument("privilege")) {
        "enqueue" => Privilege::Enqueue,
        "consume" => Privilege::Consume,
        "manage" => Privilege::Manage,
        "monitor" => Privilege::Monitor,
        _ => error::invalid_argument("privilege", "must be one of enqueue, consume, manage, monitor"),
    }
}
