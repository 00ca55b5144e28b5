//! Every SQLSTATE the library raises on purpose, each with the sentence that goes with it. A message
//! names the argument (or the queue) it is about. The SQL definitions raise theirs in
//! `sql/schema/rights.sql` (jq_grant, jq_revoke: 22004, 22023, 42501) and through the CHECK
//! constraints of jq_queues (23514).

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// 22004 for an argument that must not be NULL.
pub fn null_argument(argument: &str) -> ! {
    ereport!(ERROR, PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED, format!("{argument} must not be NULL"));
}

/// 22023 for an argument whose value is refused; `problem` completes the sentence.
pub fn invalid_argument(argument: &str, problem: impl std::fmt::Display) -> ! {
    ereport!(ERROR, PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE, format!("{argument} {problem}"));
}

/// 42501 for a caller without `privilege` on the queue, with how to grant it.
pub fn permission_denied(queue_name: &str, privilege: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("permission denied: {privilege} on queue \"{queue_name}\""),
        format!("The queue's owner grants it with jq_grant(role, '{queue_name}', '{privilege}').")
    );
}

/// 42501 for a caller that holds `privilege` on no queue at all, for the verbs that name a job
/// rather than a queue: which queue the job is in is not said (see `rights::usable_jobs`).
pub fn permission_denied_anywhere(privilege: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("permission denied: {privilege} on no queue"),
        format!("The queue's owner grants it with jq_grant(role, queue, '{privilege}').")
    );
}

/// 42501 for jq_schedule replacing a schedule of a queue the caller may not manage; its queue is
/// not named.
pub fn schedule_of_another_queue(name: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("permission denied: schedule \"{name}\" is of a queue the caller may not manage"),
        "Choose another name, or ask the queue's owner for manage on its queue."
    );
}

/// 23505 for a re-drive of a job whose dedup key another live job of its queue holds now.
pub fn dedup_key_held(job_id: i64, key: &str, holder: i64, queue_name: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_UNIQUE_VIOLATION,
        format!("job {job_id} cannot be re-driven: live job {holder} of queue \"{queue_name}\" holds its dedup_key \"{key}\""),
        format!("Re-drive it once job {holder} has finished, or cancel job {holder} first.")
    );
}

/// 0A000 for a waiting claim outside READ COMMITTED: in REPEATABLE READ or SERIALIZABLE every look
/// would use the transaction's first snapshot, which never shows a job enqueued later, so the wait
/// could only time out.
pub fn wait_needs_read_committed() -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        "jq_claim with a wait needs READ COMMITTED",
        "In REPEATABLE READ or SERIALIZABLE its snapshot would never show a job enqueued after it began."
    );
}

/// 0A000 for a claim under a key limit or a rate limit outside READ COMMITTED: the running jobs or
/// the claims would be counted in the transaction's first snapshot, which may miss claims
/// committed since the lock was taken.
pub fn flow_limit_needs_read_committed(queue_name: &str, settings: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
        format!("jq_claim of queue \"{queue_name}\", which has a {settings}, needs READ COMMITTED"),
        "In REPEATABLE READ or SERIALIZABLE its limit would be counted in a snapshot older than the claim's lock."
    );
}

/// 55000 for a call into SQL definitions older than the library (a package upgraded, its
/// `ALTER EXTENSION ... UPDATE` not run yet): their tables are not the ones this library reads.
pub fn update_needed() -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "pg_jobqueue's SQL objects in this database are older than its library",
        "Run ALTER EXTENSION pg_jobqueue UPDATE in this database."
    );
}
