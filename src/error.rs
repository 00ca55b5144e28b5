//! Deliberate SQLSTATEs for rejected arguments. Each message names the argument.

use pgrx::prelude::*;
use pgrx::PgSqlErrorCode;

/// SQLSTATE 22004 for an argument that must not be NULL.
pub fn null_argument(argument: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_NULL_VALUE_NOT_ALLOWED,
        format!("{argument} must not be NULL")
    );
}

/// SQLSTATE 22023 for an argument whose value is refused; `problem` completes the sentence.
pub fn invalid_argument(argument: &str, problem: impl std::fmt::Display) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE,
        format!("{argument} {problem}")
    );
}
