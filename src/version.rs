//! What differs between the PostgreSQL versions pg_jobqueue builds against, 15 and 18, in one place:
//! the rest of the code calls these and has no `cfg` of its own (DEVELOPMENT.md, "Server versions").

use pgrx::pg_sys;

#[cfg(not(any(feature = "pg15", feature = "pg18")))]
compile_error!("build with one of the features pg15 or pg18 (scripts/pgversion.sh picks it)");

/// Whether this process is a background worker (ours, or another extension's).
pub fn in_background_worker() -> bool {
    #[cfg(feature = "pg15")]
    {
        // SAFETY: a flag set once when the process starts.
        unsafe { pg_sys::IsBackgroundWorker }
    }
    // 17 replaced the flag with the process's type (AmBackgroundWorkerProcess()).
    #[cfg(feature = "pg18")]
    {
        // SAFETY: set once when the process starts.
        unsafe { pg_sys::MyBackendType == pg_sys::BackendType::B_BG_WORKER }
    }
}

/// This backend's local transaction id, which no two of its transactions share.
pub fn local_transaction_id() -> u32 {
    #[cfg(feature = "pg15")]
    {
        // SAFETY: a plain read of this backend's own PGPROC, set while a transaction runs.
        unsafe { (*pg_sys::MyProc).lxid }
    }
    // 17 moved it into the PGPROC's virtual transaction id.
    #[cfg(feature = "pg18")]
    {
        // SAFETY: as above.
        unsafe { (*pg_sys::MyProc).vxid.lxid }
    }
}

/// Ends this process with the exit code given; never returns (which pgrx's binding of proc_exit
/// says for 15 but not for 18).
pub fn exit_process(code: i32) -> ! {
    // SAFETY: proc_exit runs the process's exit callbacks (which abort an open transaction) and
    // exits; nothing of this process runs after it.
    unsafe { pg_sys::proc_exit(code) };
    #[allow(unreachable_code)]
    {
        unreachable!("proc_exit returned")
    }
}

/// Whether `role` may create objects in `tablespace` (PostgreSQL's ACL check of CREATE on it).
pub fn may_create_in_tablespace(tablespace: pg_sys::Oid, role: pg_sys::Oid) -> bool {
    #[cfg(feature = "pg15")]
    {
        // SAFETY: an ACL check by oid, which errors only for a tablespace that does not exist (the
        // caller looked it up just before).
        unsafe {
            pg_sys::pg_tablespace_aclcheck(tablespace, role, pg_sys::ACL_CREATE as _) == pg_sys::AclResult::ACLCHECK_OK
        }
    }
    // 16 made the ACL checks one function for every kind of object.
    #[cfg(feature = "pg18")]
    {
        // SAFETY: as above.
        unsafe {
            pg_sys::object_aclcheck(pg_sys::TableSpaceRelationId, tablespace, role, pg_sys::ACL_CREATE as _)
                == pg_sys::AclResult::ACLCHECK_OK
        }
    }
}
