//! The one clock that lease decisions use.

use pgrx::prelude::*;

/// The database server's clock at this instant: not the transaction's start (`now()`), and never the
/// client's clock. Each function reads it once and passes it to its statement as a parameter, so the
/// check of a lease and the values written agree on one instant (guide, "Why leases and fencing tokens").
pub fn now() -> TimestampWithTimeZone {
    // SAFETY: reads the server clock.
    let micros = unsafe { pg_sys::GetCurrentTimestamp() };
    TimestampWithTimeZone::try_from(micros).expect("the server clock is a valid timestamptz")
}
