//! The utility hook, installed while the library is preloaded. Before a utility statement runs it
//! notes what is the library's business: a LISTEN or UNLISTEN of a queue's channel (`listeners`),
//! a `CREATE EXTENSION pg_jobqueue` (the launcher serves the database from its commit on), and a
//! statement that needs a database to itself (`DROP DATABASE`, `ALTER DATABASE ... RENAME` or
//! `SET TABLESPACE`, `CREATE DATABASE ... TEMPLATE`), whose worker it asks to leave first, but
//! only when PostgreSQL is going to let the caller run it: the hook checks the same ownership,
//! CREATEDB and tablespace rights PostgreSQL checks afterwards, so a statement PostgreSQL refuses
//! costs the database's maintenance nothing (guide, "Maintenance").
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
use crate::version;

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
    unsafe { before(pstmt) };
    // SAFETY: the same arguments PostgreSQL gave this hook, to the hook it replaced or to its own
    // processing. If the statement fails, the error leaves through this frame, which owns nothing
    // with a destructor; a hold is then given back at rollback.
    unsafe {
        match PREV_PROCESS_UTILITY {
            Some(prev) => prev(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
            None => standard_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc),
        }
    }
}

/// The library's part, before the statement runs.
#[pg_guard]
unsafe extern "C-unwind" fn before(pstmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: PostgreSQL passes a valid planned utility statement.
    let statement = unsafe { (*pstmt).utilityStmt };
    listeners::before_utility(statement);
    // SAFETY: as above.
    if unsafe { creates_this_extension(statement) } {
        xact::at_commit(served::want_this_database);
    }
    // SAFETY: as above.
    let Some((database, need)) = (unsafe { database_needed_alone(statement) }) else {
        return;
    };
    // SAFETY: a catalog lookup by name that returns InvalidOid for a missing database.
    let oid = unsafe { pg_sys::get_database_oid(database.as_ptr(), true) };
    // A statement PostgreSQL is going to refuse must not ask the worker to leave: its caller could
    // otherwise keep any database unserved without a right on it.
    if oid == pg_sys::InvalidOid || !caller_may(need, oid) || !served::hold(oid.to_u32(), WORKER_LEAVES_WITHIN) {
        return;
    }
    // Given back when the transaction ends, not when the statement does: the launcher then reads
    // pg_database as the statement left it, and starts no worker for a database just dropped.
    xact::at_rollback(served::release);
    xact::at_commit(served::release);
}

/// What a statement that needs a database to itself does with it, for the right it takes.
#[derive(Clone, Copy)]
enum Need {
    Drop,
    Rename,
    /// `SET TABLESPACE` to the tablespace named.
    MoveTo(&'static CStr),
    /// The template of `CREATE DATABASE`.
    Copy,
}

/// Whether PostgreSQL lets the current user run the statement on `database`, as far as rights go:
/// the checks of PostgreSQL's own dropdb, RenameDatabase, movedb and createdb. A database the
/// worker serves is never a template (the launcher leaves templates alone), so a copy needs the
/// ownership that copying a database that is not a template takes.
fn caller_may(need: Need, database: pg_sys::Oid) -> bool {
    // SAFETY: the current user's oid, and catalog cache lookups by oid.
    unsafe {
        let user = pg_sys::GetUserId();
        let Some(owner) = database_owner(database) else { return false };
        if !pg_sys::has_privs_of_role(user, owner) {
            return false;
        }
        match need {
            Need::Drop => true,
            Need::Rename | Need::Copy => may_create_databases(user),
            Need::MoveTo(tablespace) => {
                let tablespace = pg_sys::get_tablespace_oid(tablespace.as_ptr(), true);
                tablespace != pg_sys::InvalidOid && version::may_create_in_tablespace(tablespace, user)
            }
        }
    }
}

/// The owner of `database`, if it still exists.
unsafe fn database_owner(database: pg_sys::Oid) -> Option<pg_sys::Oid> {
    // SAFETY: a catalog cache lookup by oid; the tuple is read while held and released once.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::DATABASEOID as _, database.into());
        if tuple.is_null() {
            return None;
        }
        let owner = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tuple)).datdba;
        pg_sys::ReleaseSysCache(tuple);
        Some(owner)
    }
}

/// Whether `role` is a superuser or has CREATEDB (PostgreSQL's own check reads the attribute of the
/// role itself, not of the roles it is a member of).
unsafe fn may_create_databases(role: pg_sys::Oid) -> bool {
    // SAFETY: a catalog cache lookup by oid; the tuple is read while held and released once.
    unsafe {
        if pg_sys::superuser_arg(role) {
            return true;
        }
        let tuple = pg_sys::SearchSysCache1(pg_sys::SysCacheIdentifier::AUTHOID as _, role.into());
        if tuple.is_null() {
            return false;
        }
        let createdb = (*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_authid>(tuple)).rolcreatedb;
        pg_sys::ReleaseSysCache(tuple);
        createdb
    }
}

/// Whether the statement is `CREATE EXTENSION pg_jobqueue`.
unsafe fn creates_this_extension(statement: *mut pg_sys::Node) -> bool {
    // SAFETY: the cast follows the node tag it was checked against; the name is NUL-terminated.
    unsafe {
        pgrx::is_a(statement, pg_sys::NodeTag::T_CreateExtensionStmt)
            && CStr::from_ptr((*statement.cast::<pg_sys::CreateExtensionStmt>()).extname) == c"pg_jobqueue"
    }
}

/// The database a statement needs to itself (no other session connected), if it is one of those,
/// and what the statement does with it.
unsafe fn database_needed_alone(statement: *mut pg_sys::Node) -> Option<(&'static CStr, Need)> {
    // SAFETY: each cast follows the node tag it was checked against; names are NUL-terminated
    // strings of the statement, which outlives this call (the 'static is for the caller's use
    // before the statement runs).
    unsafe {
        if pgrx::is_a(statement, pg_sys::NodeTag::T_DropdbStmt) {
            return Some((CStr::from_ptr((*statement.cast::<pg_sys::DropdbStmt>()).dbname), Need::Drop));
        }
        if pgrx::is_a(statement, pg_sys::NodeTag::T_RenameStmt) {
            let rename = statement.cast::<pg_sys::RenameStmt>();
            return ((*rename).renameType == pg_sys::ObjectType::OBJECT_DATABASE)
                .then(|| (CStr::from_ptr((*rename).subname), Need::Rename));
        }
        if pgrx::is_a(statement, pg_sys::NodeTag::T_CreatedbStmt) {
            return option((*statement.cast::<pg_sys::CreatedbStmt>()).options, c"template")
                .map(|name| (name, Need::Copy));
        }
        if pgrx::is_a(statement, pg_sys::NodeTag::T_AlterDatabaseStmt) {
            let alter = statement.cast::<pg_sys::AlterDatabaseStmt>();
            return option((*alter).options, c"tablespace")
                .map(|tablespace| (CStr::from_ptr((*alter).dbname), Need::MoveTo(tablespace)));
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
