//! A queue's place in shared memory: queues are per database, so the key is the database and the
//! name (queues of the same name in two databases are two queues).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use pgrx::pg_sys;

/// This backend's database, as the counters store it.
pub fn database() -> u32 {
    // SAFETY: a backend's database is set before any SQL function runs and never changes.
    unsafe { pg_sys::MyDatabaseId }.to_u32()
}

/// The hash of a queue of this database, the same in every backend: `DefaultHasher::new()` has
/// fixed keys.
pub fn hash(queue_name: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (database(), queue_name).hash(&mut hasher);
    hasher.finish()
}
