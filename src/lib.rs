//! pg_jobqueue: a reliable job queue inside PostgreSQL.
//!
//! Ownership of a running job is a lease (an expiry on the database clock) plus a fencing token that
//! grows on every claim. Each state change is one guarded UPDATE whose WHERE states the whole
//! precondition; the SQL lives in `sql/`, and each module here owns one verb of the API.

use pgrx::prelude::*;

mod backoff;
mod clock;
mod error;
mod guc;
mod input;
mod payload;
mod plans;
mod rights;
mod shmem;
mod spi_util;
mod stats;
mod wake;

mod claim;
mod enqueue;
mod lease;
mod manage;
mod metrics;
mod reap;
mod reaper;
mod retention;
mod settings;

::pgrx::pg_module_magic!(name, version);

extension_sql_file!("../sql/schema.sql", name = "schema", bootstrap);
extension_sql_file!("../sql/rights.sql", name = "rights", finalize);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    guc::init();
    if unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        reaper::register_workers();
        shmem::init();
        wake::init_hooks();
    }
}

#[cfg(any(test, feature = "pg_test"))]
mod tests;

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}
