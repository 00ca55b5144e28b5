//! Who listens: with the library preloaded, a utility hook counts the sessions that LISTEN on each
//! queue's channel, and an enqueue sends its NOTIFY only while the count is above zero.
//!
//! NOTIFY is expensive: PostgreSQL serialises the commits of notifying transactions (it holds a
//! database-wide lock from queueing the notification until the commit is flushed), which halved
//! single-job enqueue throughput in the bench. Without preload there is no count: a queue then
//! notifies only if its `notify` setting is true (see `wake`).
//!
//! A LISTEN is counted when it runs, and the count is undone if its transaction (or savepoint)
//! rolls back; an UNLISTEN takes effect when its transaction commits, as PostgreSQL's own does.
//! A LISTEN counts only when its role can use the wake-ups: it holds `consume` on the queue (or is
//! a superuser or the extension's owner; `rights::holds`). Anyone may LISTEN, and a member of
//! pg_monitor or a role with another right may read the queue's figures, but only a consumer's
//! LISTEN may switch on the NOTIFYs (and their cost) for the queue's producers.
//!
//! Counts are kept per queue by the whole key, the database and the queue's name, both stored in
//! the entry: two queues never share a count, whatever their hashes (`queue_key`). The table is
//! open addressing with linear probing. LISTEN, UNLISTEN and a session's exit change it under a
//! lock, which they take rarely; an enqueue reads it without one, a sequence number (odd while a
//! change is under way) telling it to look again, so producers pay a few loads. An entry is freed
//! when its count drops to zero.
//!
//! Nobody can fill it: a session counts itself a listener of at most `LISTENS_PER_SESSION` queues,
//! and the table has room for that many of every backend's at once, twice over so that probes stay
//! short. A LISTEN past a session's limit is not counted (its queue then notifies only if its
//! `notify` setting is true): a refusal, logged once and counted in `jq_metrics()` (`queue_key`).

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use pgrx::prelude::*;

use super::queue_key::{self, Table};
use super::xact;
use crate::rights::{self, Privilege};

/// The most queues one session counts itself a listener of.
pub const LISTENS_PER_SESSION: usize = 32;

/// A channel name is at most 63 bytes (NAMEDATALEN - 1), so a queue's part of it fits in 64.
const NAME_WORDS: usize = 8;

/// One queue's count. Every field is read without a lock (see `count_of`), so each is an atomic.
#[repr(C)]
struct Entry {
    /// The key's hash, never 0; 0: a free entry.
    tag: AtomicU64,
    database: AtomicU32,
    count: AtomicU32,
    /// The queue's name, zero-padded (a name holds no NUL byte, so the padding is unambiguous).
    name: [AtomicU64; NAME_WORDS],
}

#[repr(C)]
struct Header {
    /// Held by the one process changing the table.
    lock: AtomicU32,
    /// Entries, fixed when the table is made.
    capacity: u32,
    /// Odd while a change is under way; moved on by every change.
    seq: AtomicU64,
}

/// A queue's key as the table stores it.
#[derive(PartialEq, Eq)]
struct Key {
    tag: u64,
    database: u32,
    name: [u64; NAME_WORDS],
}

impl Key {
    /// The key of this database's queue `queue_name`; None for a name too long to be a channel's.
    fn of(queue_name: &str) -> Option<Key> {
        let bytes = queue_name.as_bytes();
        if bytes.len() > NAME_WORDS * 8 {
            return None;
        }
        let mut name = [0u64; NAME_WORDS];
        for (word, chunk) in name.iter_mut().zip(bytes.chunks(8)) {
            let mut padded = [0u8; 8];
            padded[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_le_bytes(padded);
        }
        Some(Key { tag: queue_key::hash(queue_name).max(1), database: queue_key::database(), name })
    }

    fn home(&self, capacity: usize) -> usize {
        (self.tag % capacity as u64) as usize
    }
}

impl Entry {
    fn key(&self) -> Key {
        Key {
            tag: self.tag.load(Ordering::SeqCst),
            database: self.database.load(Ordering::SeqCst),
            name: self.name.each_ref().map(|word| word.load(Ordering::SeqCst)),
        }
    }

    fn holds(&self, key: &Key) -> bool {
        self.tag.load(Ordering::SeqCst) == key.tag && self.key() == *key
    }

    fn set(&self, key: &Key, count: u32) {
        self.database.store(key.database, Ordering::SeqCst);
        for (word, value) in self.name.iter().zip(key.name) {
            word.store(value, Ordering::SeqCst);
        }
        self.count.store(count, Ordering::SeqCst);
        self.tag.store(key.tag, Ordering::SeqCst);
    }
}

/// The header, then the entries; null unless the library was preloaded. Set when the process
/// attaches shared memory, read-only afterwards.
static mut HEADER: *mut Header = std::ptr::null_mut();
static mut ENTRIES: *mut Entry = std::ptr::null_mut();

thread_local! {
    /// The jq_ channels this session counts itself a listener of. A backend is one thread.
    static LISTENING: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
    /// The jq_ channels whose LISTEN this session could not count (past its limit), each counted
    /// as a refusal once.
    static REFUSED: RefCell<HashSet<String>> = RefCell::new(HashSet::new());
    static EXIT_CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// Room for every backend's listens at once, twice over.
fn capacity() -> usize {
    // SAFETY: MaxBackends is set before shared memory is requested, and never changes after.
    let backends = usize::try_from(unsafe { pg_sys::MaxBackends }).unwrap_or(0).max(1);
    2 * backends * LISTENS_PER_SESSION
}

pub fn shared_size() -> usize {
    std::mem::size_of::<Header>() + std::mem::size_of::<Entry>() * capacity()
}

/// Takes the listener counts' part of shared memory (`shared_size()` bytes at `base`), zeroed when
/// `new`. Only from the shared-memory startup hook.
pub unsafe fn attach(base: *mut u8, new: bool) {
    // The header's size is a multiple of the entries' alignment, and zero bytes are an unlocked
    // header and free entries.
    // SAFETY: `base` holds the header and `capacity()` entries; the creator sets the capacity before
    // any other process attaches; each process sets its pointers once, before any SQL function runs.
    unsafe {
        if new {
            std::ptr::write_bytes(base, 0, shared_size());
            (*base.cast::<Header>()).capacity = capacity() as u32;
        }
        HEADER = base.cast();
        ENTRIES = base.add(std::mem::size_of::<Header>()).cast();
    }
}

/// The header and the entries; None without shared memory.
fn table() -> Option<(&'static Header, &'static [Entry])> {
    // SAFETY: read-only after startup; the part lives as long as the server and holds `capacity`
    // entries after the header.
    unsafe {
        let header = HEADER.as_ref()?;
        Some((header, std::slice::from_raw_parts(ENTRIES, header.capacity as usize)))
    }
}

fn attached() -> bool {
    table().is_some()
}

/// Where `key` is, probing from its home until a free entry.
fn find(entries: &[Entry], key: &Key) -> Option<usize> {
    let capacity = entries.len();
    let home = key.home(capacity);
    for step in 0..capacity {
        let index = (home + step) % capacity;
        let entry = &entries[index];
        if entry.tag.load(Ordering::SeqCst) == 0 {
            return None;
        }
        if entry.holds(key) {
            return Some(index);
        }
    }
    None
}

/// The sessions counted as listeners of `key`. Without a lock: a change under way (an odd
/// sequence number), or one that ran meanwhile (a new one), sends it to look again. Every store of
/// a change follows its odd number and precedes its even one, all sequentially consistent, so a
/// look that saw any of them sees the number move.
fn count_of(header: &Header, entries: &[Entry], key: &Key) -> u32 {
    let mut spins = 0u32;
    loop {
        let seq = header.seq.load(Ordering::SeqCst);
        if seq.is_multiple_of(2) {
            let count = find(entries, key).map_or(0, |index| entries[index].count.load(Ordering::SeqCst));
            if header.seq.load(Ordering::SeqCst) == seq {
                return count;
            }
        }
        back_off(&mut spins);
    }
}

/// Spins a little, then yields: the process it waits for may have lost its CPU.
fn back_off(spins: &mut u32) {
    *spins += 1;
    if *spins < 100 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Runs `f` as the one process changing the table. `f` must not raise an error: this runs in
/// commit and exit callbacks, and the lock would stay taken.
fn change<R>(f: impl FnOnce(&[Entry]) -> R) -> Option<R> {
    let (header, entries) = table()?;
    let mut spins = 0u32;
    while header.lock.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
        back_off(&mut spins);
    }
    header.seq.fetch_add(1, Ordering::SeqCst);
    let result = f(entries);
    header.seq.fetch_add(1, Ordering::SeqCst);
    header.lock.store(0, Ordering::Release);
    Some(result)
}

/// One more listener of `key`; false if there was no room (which the capacity rules out).
fn add(key: &Key) -> bool {
    change(|entries| insert(entries, key)).unwrap_or(false)
}

/// One listener of `key` fewer; the entry is freed at zero.
fn remove(key: &Key) {
    change(|entries| delete(entries, key));
}

/// `add` on `entries`. Only inside `change`.
fn insert(entries: &[Entry], key: &Key) -> bool {
    if let Some(index) = find(entries, key) {
        entries[index].count.fetch_add(1, Ordering::SeqCst);
        return true;
    }
    let capacity = entries.len();
    let home = key.home(capacity);
    let empty =
        (0..capacity).map(|step| (home + step) % capacity).find(|i| entries[*i].tag.load(Ordering::SeqCst) == 0);
    match empty {
        Some(index) => {
            entries[index].set(key, 1);
            true
        }
        None => false,
    }
}

/// `remove` on `entries`. Only inside `change`.
fn delete(entries: &[Entry], key: &Key) {
    if let Some(index) = find(entries, key) {
        if entries[index].count.fetch_sub(1, Ordering::SeqCst) <= 1 {
            vacate(entries, index);
        }
    }
}

/// Frees the entry at `index` and moves back the entries after it that probing could no longer
/// reach past the gap, so that every entry stays reachable from its home without a free entry in
/// between (deletion by backward shift). Only inside `change`.
fn vacate(entries: &[Entry], mut gap: usize) {
    let capacity = entries.len();
    entries[gap].tag.store(0, Ordering::SeqCst);
    let mut next = gap;
    loop {
        next = (next + 1) % capacity;
        let entry = &entries[next];
        if entry.tag.load(Ordering::SeqCst) == 0 {
            return;
        }
        let home = entry.key().home(capacity);
        // The entry stays if its home lies cyclically in (gap, next]: the gap is not on its path.
        let stays = if gap <= next { gap < home && home <= next } else { gap < home || home <= next };
        if !stays {
            entries[gap].set(&entry.key(), entry.count.load(Ordering::SeqCst));
            entry.tag.store(0, Ordering::SeqCst);
            gap = next;
        }
    }
}

/// Whether anyone may be listening to the queue's channel. Without shared memory there is no
/// count, so anyone may be.
pub fn may_have_listeners(queue_name: &str) -> bool {
    let Some((header, entries)) = table() else { return true };
    // A name no channel can have: nobody listens to it.
    Key::of(queue_name).is_some_and(|key| count_of(header, entries, &key) > 0)
}

/// Counts a LISTEN, UNLISTEN or DISCARD ALL of `jq_` channels before it runs (from the utility
/// hook, `super::utility`).
pub(super) fn before_utility(statement: *mut pg_sys::Node) {
    // SAFETY: PostgreSQL passes a valid utility statement; each cast follows the node tag it was
    // checked against, and channel names are NUL-terminated strings of the statement.
    unsafe {
        if pgrx::is_a(statement, pg_sys::NodeTag::T_ListenStmt) {
            let channel = (*statement.cast::<pg_sys::ListenStmt>()).conditionname;
            start_counting(&CStr::from_ptr(channel).to_string_lossy());
        } else if pgrx::is_a(statement, pg_sys::NodeTag::T_UnlistenStmt) {
            let channel = (*statement.cast::<pg_sys::UnlistenStmt>()).conditionname;
            let channel = (!channel.is_null()).then(|| CStr::from_ptr(channel).to_string_lossy().into_owned());
            unlisten_at_commit(channel);
        } else if pgrx::is_a(statement, pg_sys::NodeTag::T_DiscardStmt)
            && (*statement.cast::<pg_sys::DiscardStmt>()).target == pg_sys::DiscardMode::DISCARD_ALL
        {
            // What a pooler sends between clients: it includes UNLISTEN *.
            unlisten_at_commit(None);
        }
    }
}

/// An UNLISTEN takes effect when its transaction commits, and so does the count.
fn unlisten_at_commit(channel: Option<String>) {
    if !attached() {
        return;
    }
    xact::at_commit(move || stop_counting(channel.as_deref()));
}

fn start_counting(channel: &str) {
    if !attached() {
        return;
    }
    let Some((queue_name, key)) = channel.strip_prefix("jq_").and_then(|q| Key::of(q).map(|key| (q, key))) else {
        return;
    };
    if !listener_may_consume(queue_name) {
        return;
    }
    if LISTENING.with(|listening| listening.borrow().contains(channel)) {
        return;
    }
    if LISTENING.with(|listening| listening.borrow().len()) >= LISTENS_PER_SESSION {
        if REFUSED.with(|refused| refused.borrow_mut().insert(channel.to_owned())) {
            queue_key::refused(Table::Listeners, || {
                format!(
                    "pg_jobqueue: LISTEN \"{channel}\" does not count as a listener of queue \"{queue_name}\": \
                     a session counts as a listener of at most {LISTENS_PER_SESSION} queues, so enqueues into it \
                     notify only if its notify setting is true (further such LISTENs in this database are only \
                     counted, in jq_shared_slots_refused_total)"
                )
            });
        }
        return;
    }
    if !EXIT_CALLBACK_REGISTERED.get() {
        // SAFETY: registers a callback for this backend's exit, once.
        unsafe { pg_sys::before_shmem_exit(Some(stop_counting_at_exit), pg_sys::Datum::from(0)) };
        EXIT_CALLBACK_REGISTERED.set(true);
    }
    if !add(&key) {
        return;
    }
    LISTENING.with(|listening| listening.borrow_mut().insert(channel.to_owned()));
    // PostgreSQL forgets a LISTEN that rolls back; so does the count.
    let channel = channel.to_owned();
    xact::at_rollback(move || stop_counting(Some(&channel)));
}

/// Whether the listening role may use the queue's wake-ups (holds consume on it), in a database
/// with the extension. Definitions older than the rights (until the extension is updated) check
/// no right, as every function then does.
fn listener_may_consume(queue_name: &str) -> bool {
    // SAFETY: a catalog lookup by name, inside the LISTEN's transaction.
    let installed = unsafe { pg_sys::get_extension_oid(c"pg_jobqueue".as_ptr(), true) } != pg_sys::InvalidOid;
    installed && (!rights::enforced() || rights::holds(rights::caller(), queue_name, Privilege::Consume))
}

/// Stops counting this session as a listener of `channel` (None: of every channel).
fn stop_counting(channel: Option<&str>) {
    let channels: Vec<String> = LISTENING.with(|listening| {
        let mut listening = listening.borrow_mut();
        match channel {
            Some(channel) => listening.take(channel).into_iter().collect(),
            None => listening.drain().collect(),
        }
    });
    for channel in channels {
        if let Some(key) = channel.strip_prefix("jq_").and_then(Key::of) {
            remove(&key);
        }
    }
}

#[pg_guard]
unsafe extern "C-unwind" fn stop_counting_at_exit(_code: i32, _arg: pg_sys::Datum) {
    stop_counting(None);
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU32, AtomicU64};

    use super::{delete, find, insert, Entry, Key, NAME_WORDS};

    fn table(capacity: usize) -> Vec<Entry> {
        (0..capacity)
            .map(|_| Entry {
                tag: AtomicU64::new(0),
                database: AtomicU32::new(0),
                count: AtomicU32::new(0),
                name: std::array::from_fn(|_| AtomicU64::new(0)),
            })
            .collect()
    }

    /// Keys whose tags crowd a few homes of a small table, so that probes collide and wrap.
    fn key(n: u64) -> Key {
        Key { tag: 1 + (n % 3) * 5, database: (n % 2) as u32 + 1, name: [n; NAME_WORDS] }
    }

    /// However LISTENs and UNLISTENs of colliding queues interleave, every counted queue is found
    /// with its own count, a queue counted by nobody is not found, and freed entries are reused:
    /// freeing an entry moves back the ones behind it rather than cutting their probe paths.
    #[test]
    fn counts_stay_apart_and_reachable_through_collisions_and_frees() {
        let entries = table(7);
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut seed = 12345u64;
        for _ in 0..5000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = (seed >> 33) % 9;
            let listens = (seed >> 40).is_multiple_of(2);
            if listens && (model.contains_key(&n) || model.len() < entries.len()) {
                assert!(insert(&entries, &key(n)));
                *model.entry(n).or_default() += 1;
            } else if !listens && model.contains_key(&n) {
                delete(&entries, &key(n));
                let count = model.get_mut(&n).unwrap();
                *count -= 1;
                if *count == 0 {
                    model.remove(&n);
                }
            }
            for n in 0..9 {
                let found = find(&entries, &key(n)).map(|i| entries[i].count.load(std::sync::atomic::Ordering::SeqCst));
                assert_eq!(found, model.get(&n).copied(), "queue {n}");
            }
            let used = entries.iter().filter(|e| e.tag.load(std::sync::atomic::Ordering::SeqCst) != 0).count();
            assert_eq!(used, model.len());
        }
        // Full: a new key finds no room, a counted one still counts.
        let full = table(2);
        assert!(insert(&full, &key(0)) && insert(&full, &key(1)) && insert(&full, &key(0)));
        assert!(!insert(&full, &key(2)));
    }
}
