//! Small helpers over SPI used by every verb.

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi;

/// Runs a guarded data-changing statement and says whether it changed (or returned) any row.
pub fn changed_any(sql: &str, args: &[DatumWithOid]) -> spi::Result<bool> {
    Spi::connect_mut(|client| Ok(!client.update(sql, None, args)?.is_empty()))
}

/// Runs a data-changing statement and counts the rows it returned.
pub fn returned_rows(sql: &str, args: &[DatumWithOid]) -> spi::Result<usize> {
    Spi::connect_mut(|client| Ok(client.update(sql, None, args)?.len()))
}
