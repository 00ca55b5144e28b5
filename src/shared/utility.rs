//! The utility hook, installed while the library is preloaded. Before a utility statement runs it
//! notes what is the library's business: a LISTEN or UNLISTEN of a queue's channel (`listeners`),
//! a `CREATE EXTENSION pg_jobqueue` (the launcher serves the database from its commit on), and a
//! statement that needs a database to itself (`DROP DATABASE`, `ALTER DATABASE ... RENAME` or
//! `SET TABLESPACE`, `CREATE DATABASE ... TEMPLATE`), whose worker it asks to leave first.
//!
//! Then it runs the statement, and that part is not the library's business: PostgreSQL's own
//! processing (or the hook this one replaced) is called directly, not through pgrx's guard, so an
//! error the statement raises passes through this frame to PostgreSQL untouched, with every field
//! it had (CONTEXT, position, DETAIL) and nothing added. The frame holds nothing to drop when it
//! does. Whatever the hook itself must undo if the statement fails (a listener count, a hold on a
//! database) is undone at rollback or at exit, never by catching the error.

use std::ffi::{c_char, CStr};
use std::time::Duration;

use pgrx::prelude::*;

use super::{listeners, served, xact};

static mut PREV_PROCESS_UTILITY: pg_sys::ProcessUtility_hook_type = None;

/// How long a statement that needs a database to itself waits for the database's worker to leave
/// before it runs anyway (and then finds the worker, as it would any other session).
const WORKER_LEAVES_WITHIN: Duration = Duration::from_secs(5);

unsafe extern "C-unwind" {
    /// PostgreSQL's own utility processing, declared here without pgrx's guard, which would catch
    /// the statement's error and raise a copy of it.
    #[link_name = "standard_ProcessUtility"]
    fn standard_process_utility(
        pstmt: *mut pg_sys::PlannedStmt,
        query_string: *const c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        dest: *mut pg_sys::DestReceiver,
        qc: *mut pg_sys::QueryCompletion,
    );
}

/// Called while the library is preloaded.
pub fn init() {
    // SAFETY: the postmaster is single-threaded while it loads preloaded libraries; the hook chains
    // to the one it replaces.
    unsafe {
        PREV_PROCESS_UTILITY = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}

/// Not `pg_guard`ed, on purpose (see the top of this file): the library's own work is in `before`,
/// which is.
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: PostgreSQL passes a valid planned utility statement.
    let held = unsafe { before(pstmt) };
    // SAFETY: the same arguments PostgreSQL gave this hook, to the hook it replaced or to its own
    // processing. If the statement fails, the error leaves through this frame, which owns nothing
    // with a destructor (`held` is a bool); a hold is then given back at rollback.
    unsafe {
        match PREV_PROCESS_UTILITY {
            Some(prev) => prev(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
            None => standard_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
        }
    }
    if held {
        served::release();
    }
}

/// The library's part, before the statement runs. Returns whether it took a hold on a database.
#[pg_guard]
unsafe extern "C-unwind" fn before(pstmt: *mut pg_sys::PlannedStmt) -> bool {
    // SAFETY: PostgreSQL passes a valid planned utility statement.
    let statement = unsafe { (*pstmt).utilityStmt };
    listeners::before_utility(statement);
    // SAFETY: as above.
    if unsafe { creates_this_extension(statement) } {
        xact::at_commit(served::want_this_database);
    }
    // SAFETY: as above.
    let Some(database) = (unsafe { database_needed_alone(statement) }) else {
        return false;
    };
    // SAFETY: a catalog lookup by name that returns InvalidOid for a missing database.
    let oid = unsafe { pg_sys::get_database_oid(database.as_ptr(), true) };
    if oid == pg_sys::InvalidOid || !served::hold(oid.to_u32(), WORKER_LEAVES_WITHIN) {
        return false;
    }
    xact::at_rollback(served::release);
    true
}

/// Whether the statement is `CREATE EXTENSION pg_jobqueue`.
unsafe fn creates_this_extension(statement: *mut pg_sys::Node) -> bool {
    // SAFETY: the cast follows the node tag it was checked against; the name is NUL-terminated.
    unsafe {
        pgrx::is_a(statement, pg_sys::NodeTag::T_CreateExtensionStmt)
            && CStr::from_ptr((*statement.cast::<pg_sys::CreateExtensionStmt>()).extname) == c"pg_jobqueue"
    }
}

/// The database a statement needs to itself (no other session connected), if it is one of those.
unsafe fn database_needed_alone(statement: *mut pg_sys::Node) -> Option<&'static CStr> {
    // SAFETY: each cast follows the node tag it was checked against; names are NUL-terminated
    // strings of the statement, which outlives this call (the 'static is for the caller's use
    // before the statement runs).
    unsafe {
        if pgrx::is_a(statement, pg_sys::NodeTag::T_DropdbStmt) {
            return Some(CStr::from_ptr((*statement.cast::<pg_sys::DropdbStmt>()).dbname));
        }
        if pgrx::is_a(statement, pg_sys::NodeTag::T_RenameStmt) {
            let rename = statement.cast::<pg_sys::RenameStmt>();
            return ((*rename).renameType == pg_sys::ObjectType::OBJECT_DATABASE)
                .then(|| CStr::from_ptr((*rename).subname));
        }
        if pgrx::is_a(statement, pg_sys::NodeTag::T_CreatedbStmt) {
            return option((*statement.cast::<pg_sys::CreatedbStmt>()).options, c"template");
        }
        if pgrx::is_a(statement, pg_sys::NodeTag::T_AlterDatabaseStmt) {
            let alter = statement.cast::<pg_sys::AlterDatabaseStmt>();
            return option((*alter).options, c"tablespace").map(|_| CStr::from_ptr((*alter).dbname));
        }
        None
    }
}

/// The value of option `name` in a statement's list of DefElem, when it is a name.
unsafe fn option(options: *mut pg_sys::List, name: &CStr) -> Option<&'static CStr> {
    // SAFETY: a statement's options are DefElem nodes whose names are NUL-terminated; a value that
    // is a name is a String node.
    unsafe {
        pgrx::PgList::<pg_sys::DefElem>::from_pg(options).iter_ptr().find_map(|option| {
            let arg = (*option).arg;
            (CStr::from_ptr((*option).defname) == name && !arg.is_null() && pgrx::is_a(arg, pg_sys::NodeTag::T_String))
                .then(|| CStr::from_ptr((*arg.cast::<pg_sys::String>()).sval))
        })
    }
}
