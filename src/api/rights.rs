//! The SQL side of the rights (README, "Security"): the figures views' row filter, the question a
//! client may ask before it acts, and the trigger that makes every session forget its cached
//! answers when `jq_grants` changes. jq_grant and jq_revoke are PL/pgSQL, in
//! `sql/schema/rights.sql`; the model itself is `crate::rights`.

use pgrx::prelude::*;

use crate::rights::{self, Privilege};
use crate::{error, input};

/// The statement trigger on jq_grants: tell every session (this one included, at the end of the
/// command) to drop its cached answers once this transaction commits.
#[pg_trigger]
fn jq_grants_changed<'a>(
    trigger: &'a pgrx::PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, pgrx::AllocatedByPostgres>>, pgrx::PgTriggerError> {
    // SAFETY: queues an invalidation of the trigger's own table, sent at commit.
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(trigger.relation()?.oid()) };
    Ok(None)
}

extension_sql_file!("../../sql/schema/views.sql", name = "monitoring", requires = [jq_can_see, jq_has_right]);

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

fn parse_privilege(value: Option<&str>) -> Privilege {
    match value.unwrap_or_else(|| error::null_argument("privilege")) {
        "enqueue" => Privilege::Enqueue,
        "consume" => Privilege::Consume,
        "manage" => Privilege::Manage,
        "monitor" => Privilege::Monitor,
        _ => error::invalid_argument("privilege", "must be one of enqueue, consume, manage, monitor"),
    }
}
