//! A queue's place in shared memory, and what every table keyed by queues follows.
//!
//! **The key.** Queues are per database, so a queue's key is its database and its name (queues of
//! the same name in two databases are two queues). Tables that must never mix two queues store the
//! whole key in each entry (`counters`, `listeners`, `front`); tables whose slots only carry
//! wake-ups map queues (and jobs) to slots by hash and accept that two share one (`wake`, `finish`).
//! The hash is seeded with a secret drawn when the server starts (`pg_strong_random`), the same in
//! every backend and known to none of its roles: which queues share a slot is then chance, and no
//! role can pick queue names that land on another's queue.
//!
//! **The share rule.** A table whose entries queues take and keep (`counters`; the claim fronts of
//! `front`, kept while their queue is claimed from) would otherwise be one role's to fill, and
//! every other queue on the server would find none. So a role takes a new entry for a queue of its
//! database only while it holds fewer of the table's entries (in that database) than are free, and
//! a database only while it holds fewer than twice as many as are free (`may_take`). Whatever one
//! role does, it leaves at least as many entries free as it holds, and one database at least half
//! as many; a role or database that holds none finds an entry while any is free. A lone role can
//! take half the table; a second role of its database then still finds a sixth of it, and another
//! database as much.
//!
//! **Refusals.** A queue that finds no entry of its own (the table is full, its role or database
//! holds its share, or its session already listens to its limit) is counted per database and
//! table for `jq_metrics()` (`jq_shared_slots_refused_total`), and the first refusal of each
//! database and table is logged (LOG), then never again while the server runs.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use pgrx::pg_sys;

/// The tables that count refusals, with their label in `jq_shared_slots_refused_total`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Table {
    Counters,
    ClaimFronts,
    Listeners,
}

impl Table {
    pub const ALL: [Table; TABLES] = [Table::Counters, Table::ClaimFronts, Table::Listeners];

    pub fn label(self) -> &'static str {
        match self {
            Table::Counters => "counters",
            Table::ClaimFronts => "claim_fronts",
            Table::Listeners => "listeners",
        }
    }
}

const TABLES: usize = 3;

/// Databases whose refusals are counted apart. Beyond that many (databases with refusals, on one
/// server), a database's refusals are logged once for all of them and counted for none.
const DATABASES: usize = 256;

#[repr(C)]
struct Record {
    /// The database (0: a free record), claimed once and never given back.
    database: AtomicU32,
    refused: [AtomicU64; TABLES],
    /// Nonzero once the database's first refusal of the table was logged.
    logged: [AtomicU32; TABLES],
}

#[repr(C)]
struct Shared {
    /// Written once, when the server's shared memory is made; read-only afterwards.
    seed: [u64; 2],
    records: [Record; DATABASES],
    /// Nonzero once a refusal of a database without a record was logged, per table.
    unrecorded_logged: [AtomicU32; TABLES],
}

/// Null until the process attaches the server's shared memory (preloaded) or the claim fronts'
/// segment (`front`, without preload). Set once per process, read-only afterwards.
static mut SHARED: *mut Shared = std::ptr::null_mut();

pub fn shared_size() -> usize {
    std::mem::size_of::<Shared>()
}

/// Takes this part of shared memory (`shared_size()` bytes at `base`), zeroed and seeded when
/// `new`. Only from the shared-memory startup hook, or once the claim fronts' segment is attached.
pub unsafe fn attach(base: *mut u8, new: bool) {
    let shared = base.cast::<Shared>();
    // SAFETY: `base` holds a `Shared` (zero bytes are free records and unlogged flags); the creating
    // process seeds it before any other process can attach, and each process sets its pointer once,
    // before any SQL function of it runs.
    unsafe {
        if new {
            std::ptr::write_bytes(base, 0, shared_size());
            let mut seed = [0u8; 16];
            // Without a strong random source the seed stays zero: hashes are then as predictable as
            // an unseeded hash, and every table still keeps queues apart as its module says.
            if pg_sys::pg_strong_random(seed.as_mut_ptr().cast(), seed.len()) {
                let (low, high) = seed.split_at(8);
                (*shared).seed = [
                    u64::from_le_bytes(low.try_into().expect("8 bytes")),
                    u64::from_le_bytes(high.try_into().expect("8 bytes")),
                ];
            }
        }
        SHARED = shared;
    }
}

fn shared() -> Option<&'static Shared> {
    // SAFETY: read-only after startup; the part lives as long as the server.
    unsafe { SHARED.as_ref() }
}

/// This backend's database, as the tables store it.
pub fn database() -> u32 {
    // SAFETY: a backend's database is set before any SQL function runs and never changes.
    unsafe { pg_sys::MyDatabaseId }.to_u32()
}

/// The hash of a queue of this database, the same in every backend of the server.
pub fn hash(queue_name: &str) -> u64 {
    seeded(&(database(), queue_name))
}

/// The hash of a job of this database, the same in every backend of the server.
pub fn job_hash(job_id: i64) -> u64 {
    seeded(&(database(), job_id))
}

/// `value` hashed after the server's secret seed. `DefaultHasher::new()` has fixed keys, so the
/// same in every backend; the seed before the value makes the result unknown to whoever does not
/// know the seed.
fn seeded(value: &impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    shared().map_or([0, 0], |shared| shared.seed).hash(&mut hasher);
    value.hash(&mut hasher);
    hasher.finish()
}

/// The share rule (see the module's doc): whether a role that holds `role_held` entries of a table
/// in its database, which holds `database_held`, may take one more while `free` are free.
pub fn may_take(role_held: usize, database_held: usize, free: usize) -> bool {
    role_held < free && database_held < free.saturating_mul(2)
}

/// This database's record, claimed on first use; None when every record is another database's.
fn record() -> Option<&'static Record> {
    let shared = shared()?;
    let database = database();
    for record in &shared.records {
        let held = record.database.load(Ordering::SeqCst);
        if held == database {
            return Some(record);
        }
        if held == 0 {
            match record.database.compare_exchange(0, database, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return Some(record),
                Err(now) if now == database => return Some(record),
                Err(_) => {}
            }
        }
    }
    None
}

/// A queue of this database found no entry of its own in `table`: counts it, and logs `message()`
/// (LOG) if it is the database's first refusal in that table. Raises no error, so it may run at
/// commit.
pub fn refused(table: Table, message: impl FnOnce() -> String) {
    let Some(shared) = shared() else { return };
    let first = match record() {
        Some(record) => {
            record.refused[table as usize].fetch_add(1, Ordering::SeqCst);
            record.logged[table as usize].swap(1, Ordering::SeqCst) == 0
        }
        None => shared.unrecorded_logged[table as usize].swap(1, Ordering::SeqCst) == 0,
    };
    if first {
        pgrx::log!("{}", message());
    }
}

/// This database's refusals in `table` since the server started (none without preload).
pub fn refusals(table: Table) -> u64 {
    let Some(shared) = shared() else { return 0 };
    let database = database();
    shared
        .records
        .iter()
        .find(|record| record.database.load(Ordering::SeqCst) == database)
        .map_or(0, |record| record.refused[table as usize].load(Ordering::SeqCst))
}

#[cfg(test)]
mod tests {
    use super::may_take;

    /// A lone role takes half the table; a second role of its database, and then another database,
    /// each still find some; and a newcomer finds an entry while any is free.
    #[test]
    fn no_role_or_database_takes_what_the_others_need() {
        let capacity = 256;
        let take = |role_held: &mut usize, database_held: &mut usize, used: &mut usize| {
            while *used < capacity && may_take(*role_held, *database_held, capacity - *used) {
                *role_held += 1;
                *database_held += 1;
                *used += 1;
            }
        };
        let (mut first_role, mut first_database, mut used) = (0, 0, 0);
        take(&mut first_role, &mut first_database, &mut used);
        assert_eq!(first_role, capacity / 2, "a lone role takes half");
        let mut second_role = 0;
        take(&mut second_role, &mut first_database, &mut used);
        assert!(second_role >= capacity / 6, "a second role of the database finds {second_role}");
        let (mut other_role, mut other_database) = (0, 0);
        take(&mut other_role, &mut other_database, &mut used);
        assert!(other_role >= capacity / 8, "another database finds {other_role}");
        assert!(used < capacity, "three greedy roles leave entries free");
        assert!(may_take(0, 0, 1) && !may_take(0, 0, 0), "a newcomer finds the last free entry");
    }
}
