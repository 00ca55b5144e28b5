//! The key locks (guide, "Flow control"): one per queue and concurrency key, taken without
//! waiting by the claims of the key rotation (`api::keys`), and the key "" of a queue for its rate
//! (`api::rates`). They are advisory locks of their own kind in PostgreSQL's lock table
//! (`pg_locks`: locktype `advisory`, objsubid 27249), which every backend shares, preloaded or not:
//! nothing is written for them, and no SQL function can take them.

use pgrx::pg_sys;

use super::xact;

/// `locktag_field4` of the key locks: PostgreSQL's advisory lock functions use 1 and 2.
const KEY_LOCK_CLASS: u16 = 0x6A71;

/// A key's lock, taken without waiting; let go when dropped, unless kept for the transaction.
/// The key "" (never a concurrency key) is the queue's rate lock (`rates`).
pub struct KeyLock {
    tag: pg_sys::LOCKTAG,
}

thread_local! {
    /// The key locks kept until the end of a transaction: (its local transaction id, how many). A
    /// backend is one thread.
    static KEPT: std::cell::Cell<(u32, i32)> = const { std::cell::Cell::new((0, 0)) };
}

/// How many key locks this transaction keeps.
fn kept() -> i32 {
    let (transaction, count) = KEPT.get();
    if transaction == xact::this_transaction() {
        count
    } else {
        0
    }
}

impl KeyLock {
    pub fn try_take(queue_name: &str, key: &str) -> Option<KeyLock> {
        // SAFETY: a plain read of a setting that is fixed at server start.
        if kept() >= unsafe { pg_sys::max_locks_per_xact } {
            return None;
        }
        let hash = fnv1a(queue_name.as_bytes(), key.as_bytes());
        let tag = pg_sys::LOCKTAG {
            // SAFETY: a plain read of this backend's database.
            locktag_field1: unsafe { pg_sys::MyDatabaseId }.to_u32(),
            locktag_field2: (hash >> 32) as u32,
            locktag_field3: hash as u32,
            locktag_field4: KEY_LOCK_CLASS,
            locktag_type: pg_sys::LockTagType::LOCKTAG_ADVISORY as u8,
            locktag_lockmethodid: pg_sys::USER_LOCKMETHOD as u8,
        };
        // SAFETY: a transaction-scoped lock on a tag of our own; `dontWait` returns at once.
        let result = unsafe { pg_sys::LockAcquire(&tag, pg_sys::ExclusiveLock as i32, false, true) };
        // Not `then_some`: its KeyLock would be made, and dropped (released), when the lock is not ours.
        (result != pg_sys::LockAcquireResult::LOCKACQUIRE_NOT_AVAIL).then(|| KeyLock { tag })
    }

    /// Holds the lock until the transaction ends.
    pub fn keep(self) {
        KEPT.set((xact::this_transaction(), kept() + 1));
        std::mem::forget(self);
    }
}

impl Drop for KeyLock {
    fn drop(&mut self) {
        // An error ends the transaction, and with it the lock.
        if std::thread::panicking() {
            return;
        }
        // SAFETY: the lock was taken by `try_take` in this transaction and is released once.
        unsafe {
            pg_sys::LockRelease(&self.tag, pg_sys::ExclusiveLock as i32, false);
        }
    }
}

/// FNV-1a over the queue name, a zero byte and the key: a hash every backend computes alike,
/// whatever build it runs. Two keys of one hash share a lock, which only makes one of them wait
/// its turn.
fn fnv1a(queue_name: &[u8], key: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in queue_name.iter().chain(&[0]).chain(key) {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn the_key_hash_separates_queue_and_key() {
        assert_ne!(fnv1a(b"ab", b"c"), fnv1a(b"a", b"bc"));
        assert_eq!(fnv1a(b"q", b"k"), fnv1a(b"q", b"k"));
    }
}
