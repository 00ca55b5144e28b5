//! pg_jobqueue: a reliable job queue inside PostgreSQL.
//!
//! Ownership of a running job is a lease (an expiry on the database clock) plus a fencing token that
//! grows on every claim. Each state change is one guarded UPDATE whose WHERE states the whole
//! precondition. The floors, top down (DEVELOPMENT.md has one line per module):
//! - `api`: the SQL functions, one file per surface;
//! - `shared`: what backends share when the library is preloaded (counters, wake-ups, listeners)
//!   and the end-of-transaction hook they use;
//! - `rights`, `input`, `error`: who may call, what arguments pass, and what a refusal says;
//! - `db`: the only code that runs SQL (the statements are `sql/queries/*.sql`);
//! - `guc`: every setting; `version`: what differs between the PostgreSQL versions.
//!
//! Beside them, `reaper` (the background worker, which runs the same pass bodies as `api`) and
//! `upgrade` (symbols older install scripts still call).

#![deny(unsafe_op_in_unsafe_fn)]

use pgrx::prelude::*;

mod api;
mod cron;
mod db;
mod error;
mod guc;
mod input;
mod reaper;
mod rights;
mod shared;
mod upgrade;
mod version;

#[cfg(any(test, feature = "pg_test"))]
mod testing;

::pgrx::pg_module_magic!(name, version);

// The schema by object kind. The tables come first; the views, the constraints and the backoff
// function are declared beside the functions they need (api/rights.rs, api/configure.rs,
// api/backoff.rs); the rights come last, once every function exists.
extension_sql_file!("../sql/schema/tables.sql", name = "schema", bootstrap);
extension_sql_file!("../sql/schema/rights.sql", name = "rights", finalize);

#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    no_rust_backtraces();
    guc::init();
    if guc::preloaded() {
        reaper::register_workers();
        shared::init();
    }
}

/// An error the extension raises goes through pgrx's panic hook, which captures a Rust backtrace
/// into its DETAIL wherever `RUST_BACKTRACE` (or `RUST_LIB_BACKTRACE`) is set in the server's
/// environment, as some hosts' shells set it: clients would see the extension's insides in every
/// refusal. Rust decides once per library whether backtraces are captured, at the first capture,
/// so one made here with `RUST_LIB_BACKTRACE=0` turns them off for this library alone; the
/// environment is put back as it was, for whatever else the server runs. While the library is
/// preloaded the postmaster does it once, and every process it starts inherits the choice.
fn no_rust_backtraces() {
    const VARIABLE: &str = "RUST_LIB_BACKTRACE";
    let before = std::env::var_os(VARIABLE);
    // _PG_init runs in a single-threaded process (the postmaster, or a backend loading the
    // library), so changing the environment races with nothing.
    std::env::set_var(VARIABLE, "0");
    let _ = std::backtrace::Backtrace::capture();
    match before {
        Some(value) => std::env::set_var(VARIABLE, value),
        None => std::env::remove_var(VARIABLE),
    }
}

/// Required by `cargo pgrx test`.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec![]
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn functions_work_whatever_the_callers_search_path() {
        run("CREATE SCHEMA decoy");
        run("CREATE TABLE decoy.jq_jobs (id int)");
        run("SET LOCAL search_path = decoy, pg_catalog");
        let id = one::<i64>("SELECT public.jq_enqueue('q', '{}')");
        assert_eq!(one::<i64>("SELECT id FROM public.jq_claim('q', 'w')"), id);
        run("RESET search_path");
    }

    /// Every table and sequence of the extension is registered with pg_extension_config_dump, so
    /// pg_dump keeps its rows, except those named here with the reason: a new table fails this test
    /// until it is registered or added here.
    #[pg_test]
    fn every_table_is_kept_by_pg_dump() {
        const NOT_DUMPED: [&str; 2] = [
            // Partitioned: its rows are in its partitions, which are dumped.
            "jq_job_history",
            // Its rows come from the install script; a restored database runs its passes anew.
            "jq_maintenance_passes",
        ];
        let unkept = one::<String>(
            "SELECT coalesce(string_agg(c.relname::text, ', ' ORDER BY c.relname), '')
             FROM pg_extension e
             JOIN pg_depend d ON d.refclassid = 'pg_extension'::regclass AND d.refobjid = e.oid AND d.deptype = 'e'
             JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
             WHERE e.extname = 'pg_jobqueue' AND c.relkind IN ('r', 'p', 'S')
               AND c.oid <> ALL (e.extconfig)",
        );
        assert_eq!(unkept, NOT_DUMPED.join(", "), "tables and sequences of the extension that pg_dump would not keep");
    }
}
