//! Settings (`pg_jobqueue.*`). The limits are PGC_SUSET: only a superuser (or a role granted
//! `SET ON PARAMETER`) can change them, so an ordinary client cannot switch a safety limit off.

use pgrx::guc::{GucContext, GucFlags, GucRegistry, GucSetting};
use pgrx::pg_sys;

pub static MAX_PAYLOAD_BYTES: GucSetting<i32> = GucSetting::<i32>::new(1024 * 1024);
pub static MAX_LEASE_SECONDS: GucSetting<i32> = GucSetting::<i32>::new(24 * 60 * 60);
pub static MAX_BATCH_SIZE: GucSetting<i32> = GucSetting::<i32>::new(1000);

pub fn init() {
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_payload_bytes",
        c"Largest job payload accepted by jq_enqueue and jq_enqueue_batch.",
        c"Measured as the size of the jsonb value before compression. Larger payloads are refused.",
        &MAX_PAYLOAD_BYTES,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_BYTE,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_lease",
        c"Longest lease jq_claim grants or jq_heartbeat extends to in one call.",
        c"Longer requested leases are refused; long jobs should heartbeat instead.",
        &MAX_LEASE_SECONDS,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_int_guc(
        c"pg_jobqueue.max_batch_size",
        c"Largest batch_size jq_claim accepts.",
        c"",
        &MAX_BATCH_SIZE,
        1,
        i32::MAX,
        GucContext::Suset,
        GucFlags::default(),
    );
    unsafe { pg_sys::MarkGUCPrefixReserved(c"pg_jobqueue".as_ptr()) };
}
