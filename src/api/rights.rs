//! The SQL side of the rights (guide, "Security"): the figures views' row filter, the question a
//! client may ask before it acts (the trigger that makes every session forget its cached answers
//! when `jq_grants` changes is `settings::jq_table_changed`). jq_grant and jq_revoke are PL/pgSQL, in
//! `sql/schema/rights.sql`; the model itself is `crate::rights`.

use pgrx::prelude::*;

use crate::rights::{self, Privilege};
use crate::{db, error, input};

const SCHEMA_USAGE_RELEASE: &str = include_str!("../../sql/queries/schema_usage_release.sql");

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

/// The event trigger `jq_extension_dropped` (`sql/schema/rights.sql`), at the start of every
/// `DROP EXTENSION` of the database: when pg_jobqueue is among the extensions dropped, it takes back
/// the USAGE on the extension's schema that jq_grant gave and the install gave pg_monitor, which
/// would otherwise outlive the extension in a schema that stays. Its search_path is pinned in its
/// definition, as every function's is.
#[pg_guard]
#[no_mangle]
pub unsafe extern "C-unwind" fn jq_extension_dropped(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    // SAFETY: PostgreSQL calls an event trigger function with an EventTriggerData as its context
    // (checked by tag before the cast); a DROP's parse tree is a DropStmt, whose objects for
    // DROP EXTENSION are String nodes; both live for the whole call.
    let dropped = unsafe {
        let context = (*fcinfo).context;
        if context.is_null() || !pgrx::is_a(context, pg_sys::NodeTag::T_EventTriggerData) {
            error!("jq_extension_dropped runs only as an event trigger");
        }
        let tree = (*context.cast::<pg_sys::EventTriggerData>()).parsetree;
        pgrx::is_a(tree, pg_sys::NodeTag::T_DropStmt) && {
            let drop = tree.cast::<pg_sys::DropStmt>();
            (*drop).removeType == pg_sys::ObjectType::OBJECT_EXTENSION
                && pgrx::PgList::<pg_sys::Node>::from_pg((*drop).objects).iter_ptr().any(|name| {
                    pgrx::is_a(name, pg_sys::NodeTag::T_String)
                        && std::ffi::CStr::from_ptr((*name.cast::<pg_sys::String>()).sval) == c"pg_jobqueue"
                })
        }
    };
    if dropped {
        rights::as_owner(|| {
            let statements = db::read_only_rows::<(String,)>(SCHEMA_USAGE_RELEASE, &[])?;
            for (statement,) in statements {
                db::rows_planned_per_call::<()>(&statement, &[])?;
            }
            Ok::<(), pgrx::spi::Error>(())
        })
        .expect("the schema's USAGE is taken back");
    }
    pg_sys::Datum::from(0)
}

/// The version-1 calling convention of `jq_extension_dropped`, which PostgreSQL asks for before it
/// calls a C function.
#[no_mangle]
pub extern "C" fn pg_finfo_jq_extension_dropped() -> &'static pg_sys::Pg_finfo_record {
    const V1: pg_sys::Pg_finfo_record = pg_sys::Pg_finfo_record { api_version: 1 };
    &V1
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
