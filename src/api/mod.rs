//! The SQL functions, one file per surface. Each function checks its arguments (`input`) and its
//! caller's right (`rights`) before any statement, reads the database clock once (`db::clock`),
//! and then runs its statements through `db` with the extension owner's rights.

pub mod backoff;
pub mod claim;
pub mod configure;
pub mod dependencies;
pub mod enqueue;
pub mod held;
pub mod keys;
pub mod lease;
pub mod listing;
pub mod maintenance;
pub mod metrics;
pub mod plans;
pub mod progress;
pub mod rates;
pub mod reap;
pub mod redrive;
pub mod results;
pub mod retention;
pub mod rights;
pub mod schedules;
pub mod settings;
pub mod tokens;
pub mod wait;
