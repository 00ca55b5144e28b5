//! Per-queue counters and latency histograms in shared memory (library preloaded only).
//!
//! Counting adds no write and no lock to the hot path: each verb notes what happened, and when its
//! transaction commits (`xact::at_commit`) the notes are applied to shared memory with atomic
//! additions. A transaction that rolls back counts nothing and takes no entry, and neither does a
//! savepoint or exception block that rolls back, so the counters tell what committed.
//!
//! The queue table is a fixed array of `pg_jobqueue.stats_max_queues` entries for the whole
//! server, each for one queue of one database (its database and full name are stored in it, so
//! queues of the same name in two databases are two queues), taken on first use and never given
//! back. Entries are found by probing from the queue's hash without a lock; taking one takes a
//! lock, once per queue.
//!
//! Who takes an entry: the role whose committed work first counts the queue (`rights::caller`), by
//! the share rule of `queue_key`: a role takes one only while it holds fewer of the table's entries
//! (in its database) than are free, and a database only while it holds fewer than twice as many.
//! So a role that may create queue names (an enqueue or consume right on a pattern) fills at most
//! half of what others left, and whatever it does, another role or database finds an entry while
//! any is free. A background worker (the reaper) never takes one: what it counts goes to the
//! queue's entry if the queue has one, so that nobody can make it take entries for them.
//!
//! A queue refused an entry (the table full, or its role or database at its share) is counted with
//! its database's other such queues under queue "*" (an entry that needs no share, while one is
//! free), and not at all after; the first refusal of each database is logged, and every refusal
//! is counted in `jq_metrics()` (`queue_key`, "Refusals").
//!
//! Latency is kept twice in the same fine histogram (see `histogram`): once since the last reset,
//! for the Prometheus histogram, and once per minute in a ring of six, for percentiles over the last
//! five minutes.

use std::cell::{RefCell, UnsafeCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

use pgrx::pg_sys;

use super::histogram::{bucket_of, quantile, BUCKETS};
use super::queue_key::{self, Table};
use super::xact;
use crate::guc;

/// Defines the counters once: each with its column and metric name and its help text. Adding a
/// counter is one line here and one column of `jq_queue_counters`, in the same place (DEVELOPMENT.md,
/// "Adding things").
macro_rules! counters {
    ($($counter:ident: $name:literal, $help:literal;)*) => {
        /// What is counted, one counter each.
        #[derive(Clone, Copy)]
        pub enum Counter { $($counter),* }

        pub const COUNTERS: usize = [$($name),*].len();

        impl Counter {
            /// The counter's column in jq_queue_counters, and its metric `jq_<name>_total`.
            pub const NAMES: [&'static str; COUNTERS] = [$($name),*];
            pub const HELP: [&'static str; COUNTERS] = [$($help),*];
        }
    };
}

counters! {
    Claims: "claims", "Jobs claimed.";
    Completions: "completions", "Jobs completed by their lease holder.";
    Failures: "failures", "Failed attempts reported with jq_fail.";
    Retries: "retries", "Failed attempts and expired leases that returned the job to pending, to run again.";
    Deaths: "deaths", "Jobs that became dead: not retryable, or attempts spent.";
    LeaseExpirations: "lease_expirations", "Leases that expired and were reaped.";
    StaleCompletions: "stale_completions", "Completions and failures refused: stale token, wrong owner or expired lease.";
    StaleHeartbeats: "stale_heartbeats", "Heartbeats refused: stale token, wrong owner or expired lease.";
    Cancellations: "cancellations", "Jobs cancelled.";
}

/// Error codes counted one by one per queue; the rest are counted together.
const ERROR_CODES: usize = 16;
const ERROR_CODE_BYTES: usize = 256; // 64 characters of up to 4 bytes
const NAME_BYTES: usize = 64;
const WINDOW_MINUTES: usize = 6;
/// The percentile window: the current minute and the four before it.
const WINDOW_SPAN: u64 = 5;

const FREE: u32 = 0;
const WRITING: u32 = 1;
const READY: u32 = 2;

#[repr(C)]
struct Histogram {
    counts: [AtomicU64; BUCKETS],
    sum_us: AtomicU64,
}

#[repr(C)]
struct Minute {
    minute: AtomicU64,
    counts: [AtomicU64; BUCKETS],
}

#[repr(C)]
struct Latency {
    total: Histogram,
    recent: [Minute; WINDOW_MINUTES],
}

/// Text written once by the backend that claimed its slot (state FREE -> WRITING), then read by
/// every backend after the state says READY: the cell says that it changes behind shared references.
#[repr(C)]
struct Label<const N: usize> {
    len: UnsafeCell<u32>,
    bytes: UnsafeCell<[u8; N]>,
}

impl<const N: usize> Label<N> {
    /// Only by the backend that moved the owning state from FREE to WRITING.
    unsafe fn write(&self, text: &[u8]) {
        let len = text.len().min(N);
        // SAFETY: the caller is the only writer (it won the FREE -> WRITING exchange), and no one
        // reads before the state says READY.
        unsafe {
            (&mut *self.bytes.get())[..len].copy_from_slice(&text[..len]);
            *self.len.get() = len as u32;
        }
    }

    /// Only after the owning state was seen READY.
    unsafe fn read(&self) -> &[u8] {
        // SAFETY: written once before READY and never again, so shared reads are sound.
        unsafe { &(&*self.bytes.get())[..*self.len.get() as usize] }
    }
}

#[repr(C)]
struct ErrorCode {
    state: AtomicU32,
    code: Label<ERROR_CODE_BYTES>,
    count: AtomicU64,
}

#[repr(C)]
struct Entry {
    state: AtomicU32,
    /// The database of the queue, written with the name.
    database: UnsafeCell<u32>,
    /// The role the entry is charged to in the share rule, written with the name; 0 for "*".
    role: UnsafeCell<u32>,
    name: Label<NAME_BYTES>,
    /// When this entry was last reset, as a TimestampTz; 0: never (counted since the server started).
    reset_at: AtomicI64,
    counters: [AtomicU64; COUNTERS],
    errors: [ErrorCode; ERROR_CODES],
    other_errors: AtomicU64,
    wait: Latency,
    run: Latency,
}

/// Aligned like an entry (which holds 64-bit atomics), since the entries follow it.
#[repr(C, align(8))]
struct Header {
    capacity: u32,
    /// Held while an entry is taken: by one process at a time, for a scan of the table.
    lock: AtomicU32,
    /// Entries taken so far: a session's refusal stands until this moves.
    taken: AtomicU32,
}

static mut HEADER: *mut Header = std::ptr::null_mut();
static mut ENTRIES: *mut Entry = std::ptr::null_mut();

pub fn shared_size() -> usize {
    let capacity = guc::STATS_MAX_QUEUES.get() as usize;
    std::mem::size_of::<Header>() + std::mem::size_of::<Entry>() * capacity
}

/// Takes the counters' part of shared memory (`shared_size()` bytes at `base`), zeroed when `new`.
/// Only from the shared-memory startup hook.
pub unsafe fn attach(base: *mut u8, new: bool) {
    // SAFETY: `base` holds `shared_size()` bytes, which fits a header and `capacity` entries; the
    // pointers are written once per process, before any backend reads them.
    unsafe {
        if new {
            std::ptr::write_bytes(base, 0, shared_size());
            let header = base.cast::<Header>();
            (*header).capacity = guc::STATS_MAX_QUEUES.get() as u32;
        }
        HEADER = base.cast::<Header>();
        ENTRIES = base.add(std::mem::size_of::<Header>()).cast::<Entry>();
    }
}

/// Whether this session counts: the library was preloaded and `pg_jobqueue.stats` is on.
fn counting() -> bool {
    attached() && guc::STATS_ENABLED.get()
}

fn attached() -> bool {
    // SAFETY: written once per process at startup, read-only afterwards.
    !unsafe { HEADER }.is_null()
}

fn header() -> &'static Header {
    // SAFETY: only called once attached; the header is written before the pointer, and lives as
    // long as the server.
    unsafe { &*HEADER }
}

fn capacity() -> usize {
    header().capacity as usize
}

fn entry(index: usize) -> &'static Entry {
    // SAFETY: callers pass an index below `capacity()`; entries live as long as the server, and
    // every field is an atomic or written before its state says READY.
    unsafe { &*ENTRIES.add(index) }
}

/// The entry that counts a queue of this database for `role`'s work: the queue's own, taken on
/// first use if the share rule allows; else the database's "*" entry; None when even that could
/// not be had. Only at commit: a refusal is logged and counted.
fn entry_index(queue_name: &str, role: u32) -> Option<usize> {
    let taken = header().taken.load(Ordering::SeqCst);
    let cached = CACHE.with(|cache| cache.borrow().get(queue_name).copied());
    let known = match cached {
        Some(Cached::Own(index)) => return Some(index),
        // Shares only shrink as entries are taken, and none is given back, so a refusal stands;
        // but the queue's own entry, or "*", may have been taken since (by another role).
        Some(Cached::Refused { role: refused, fallback, taken: then }) if refused == role => {
            if then == taken {
                return fallback;
            }
            Some(fallback)
        }
        _ => None,
    };
    let own = find(queue_name).or_else(|| if taker() && known.is_none() { take(queue_name, role, true) } else { None });
    let cached = match own {
        Some(index) => Cached::Own(index),
        None => {
            let fallback = known.flatten().or_else(|| find(OTHER_QUEUES)).or_else(|| take(OTHER_QUEUES, 0, false));
            if taker() && known.is_none() {
                let capacity = capacity();
                queue_key::refused(Table::Counters, || {
                    format!(
                        "pg_jobqueue: queue \"{queue_name}\" gets no counters of its own: the {capacity} entries of \
                         pg_jobqueue.stats_max_queues are taken, or its role or database holds its share of them; \
                         it is counted under queue \"*\" (further such queues of this database are only counted, in \
                         jq_shared_slots_refused_total)"
                    )
                });
            }
            Cached::Refused { role, fallback, taken }
        }
    };
    CACHE.with(|cache| cache.borrow_mut().insert(queue_name.to_owned(), cached));
    match cached {
        Cached::Own(index) => Some(index),
        Cached::Refused { fallback, .. } => fallback,
    }
}

/// Whether this process takes entries: not a background worker (see the module's doc).
fn taker() -> bool {
    !crate::version::in_background_worker()
}

/// The label of the entry that counts a database's queues refused an entry of their own (not a
/// valid queue name, so it cannot be mistaken for one).
pub const OTHER_QUEUES: &str = "*";

/// The entry of a queue of this database, if it has one. Without a lock: an entry is taken at the
/// first free one of its probe sequence (under the lock) and never freed, so a free entry ends the
/// search.
fn find(queue_name: &str) -> Option<usize> {
    let database = queue_key::database();
    let capacity = capacity();
    let start = (queue_key::hash(queue_name) % capacity as u64) as usize;
    for probe in 0..capacity {
        let entry = entry((start + probe) % capacity);
        let mut state = entry.state.load(Ordering::SeqCst);
        while state == WRITING {
            std::hint::spin_loop();
            state = entry.state.load(Ordering::SeqCst);
        }
        if state == FREE {
            return None;
        }
        if entry_key(entry) == (database, queue_name.as_bytes()) {
            return Some((start + probe) % capacity);
        }
    }
    None
}

/// Takes an entry for a queue of this database, charged to `role`, under the share rule if
/// `shared`; its own if another process took it meanwhile. None if refused or full.
fn take(queue_name: &str, role: u32, shared: bool) -> Option<usize> {
    let header = header();
    let mut spins = 0u32;
    while header.lock.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
        spins += 1;
        if spins < 100 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    // Under the lock, nothing here can fail: this runs at commit.
    let taken = find(queue_name).or_else(|| {
        let database = queue_key::database();
        let capacity = capacity();
        if shared {
            let (mut free, mut role_held, mut database_held) = (0, 0, 0);
            for index in 0..capacity {
                let entry = entry(index);
                if entry.state.load(Ordering::SeqCst) == FREE {
                    free += 1;
                    continue;
                }
                // SAFETY: READY (only the lock holder writes); written before that.
                let (held_database, held_role) = unsafe { (*entry.database.get(), *entry.role.get()) };
                if held_database == database {
                    database_held += 1;
                    role_held += usize::from(held_role == role);
                }
            }
            if !queue_key::may_take(role_held, database_held, free) {
                return None;
            }
        }
        let start = (queue_key::hash(queue_name) % capacity as u64) as usize;
        let index = (0..capacity)
            .map(|probe| (start + probe) % capacity)
            .find(|index| entry(*index).state.load(Ordering::SeqCst) == FREE)?;
        let entry = entry(index);
        entry.state.store(WRITING, Ordering::SeqCst);
        // SAFETY: this process holds the lock and moved the state to WRITING; readers wait for
        // READY.
        unsafe {
            *entry.database.get() = database;
            *entry.role.get() = role;
            entry.name.write(queue_name.as_bytes());
        }
        entry.state.store(READY, Ordering::SeqCst);
        header.taken.fetch_add(1, Ordering::SeqCst);
        Some(index)
    });
    header.lock.store(0, Ordering::Release);
    taken
}

/// The database and name of an entry whose state is READY.
fn entry_key(entry: &Entry) -> (u32, &[u8]) {
    // SAFETY: callers read the state as READY first; both are written before it.
    unsafe { (*entry.database.get(), entry.name.read()) }
}

enum Event {
    Count(Counter),
    Failure(String),
    Claimed(i64),
    Completed(i64),
}

/// What a session knows of a queue's entry.
#[derive(Clone, Copy)]
enum Cached {
    /// The queue's own: entries are never freed, so this stays right.
    Own(usize),
    /// Refused for `role` (or, in a background worker, not found) when `taken` entries were taken;
    /// counted in `fallback` ("*") meanwhile.
    Refused { role: u32, fallback: Option<usize>, taken: u32 },
}

thread_local! {
    /// This session's knowledge per queue name (of its one database). A backend is one thread.
    static CACHE: RefCell<HashMap<String, Cached>> = RefCell::new(HashMap::new());
}

fn note(queue_name: &str, event: Event) {
    if !counting() {
        return;
    }
    let queue_name = queue_name.to_owned();
    let role = crate::rights::caller().to_u32();
    xact::at_commit(move || {
        if let Some(index) = entry_index(&queue_name, role) {
            apply_event(entry(index), event, current_minute());
        }
    });
}

/// One more of `counter` for the queue, if the transaction commits.
pub fn count(queue_name: &str, counter: Counter) {
    note(queue_name, Event::Count(counter));
}

/// A failed attempt with its error code (counted as a failure, and by code).
pub fn failure(queue_name: &str, error_code: &str) {
    note(queue_name, Event::Failure(error_code.to_owned()));
}

/// A claim, and the job's waiting time: from `available_at` to its claim.
pub fn claimed(queue_name: &str, waited_micros: i64) {
    note(queue_name, Event::Claimed(waited_micros));
}

/// A completion, and the job's running time: from its claim to its completion.
pub fn completed(queue_name: &str, ran_micros: i64) {
    note(queue_name, Event::Completed(ran_micros));
}

fn apply_event(entry: &Entry, event: Event, minute: u64) {
    match event {
        Event::Count(counter) => {
            entry.counters[counter as usize].fetch_add(1, Ordering::Relaxed);
        }
        Event::Failure(code) => {
            entry.counters[Counter::Failures as usize].fetch_add(1, Ordering::Relaxed);
            match error_code_slot(entry, &code) {
                Some(slot) => slot.count.fetch_add(1, Ordering::Relaxed),
                None => entry.other_errors.fetch_add(1, Ordering::Relaxed),
            };
        }
        Event::Claimed(waited) => {
            entry.counters[Counter::Claims as usize].fetch_add(1, Ordering::Relaxed);
            record(&entry.wait, waited, minute);
        }
        Event::Completed(ran) => {
            entry.counters[Counter::Completions as usize].fetch_add(1, Ordering::Relaxed);
            record(&entry.run, ran, minute);
        }
    }
}

/// The slot counting `code` in this entry, claimed on first use; None once all are taken.
fn error_code_slot<'a>(entry: &'a Entry, code: &str) -> Option<&'a ErrorCode> {
    let bytes = code.as_bytes();
    for slot in &entry.errors {
        if slot.state.compare_exchange(FREE, WRITING, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            // SAFETY: this backend moved the state to WRITING.
            unsafe { slot.code.write(bytes) };
            slot.state.store(READY, Ordering::SeqCst);
            return Some(slot);
        }
        while slot.state.load(Ordering::SeqCst) == WRITING {
            std::hint::spin_loop();
        }
        // SAFETY: the state is READY: a slot never goes back to FREE.
        if unsafe { slot.code.read() } == bytes {
            return Some(slot);
        }
    }
    None
}

fn record(latency: &Latency, micros: i64, minute: u64) {
    let micros = micros.max(0) as u64;
    let bucket = bucket_of(micros);
    latency.total.counts[bucket].fetch_add(1, Ordering::Relaxed);
    latency.total.sum_us.fetch_add(micros, Ordering::Relaxed);
    let slot = &latency.recent[(minute % WINDOW_MINUTES as u64) as usize];
    let stamp = slot.minute.load(Ordering::SeqCst);
    // The first to reach a slot in a new minute clears it. A count added by another backend
    // between the swap and the clearing is lost: these are figures for operators, not accounts.
    if stamp != minute && slot.minute.compare_exchange(stamp, minute, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
        slot.counts.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    }
    slot.counts[bucket].fetch_add(1, Ordering::Relaxed);
}

fn current_minute() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() / 60).unwrap_or(0)
}

/// Zeroes every counter and histogram of this database's queues. Queue entries and error codes
/// stay where they are.
pub fn reset() {
    if !attached() {
        return;
    }
    let database = queue_key::database();
    // SAFETY: reads the server clock.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    for index in 0..capacity() {
        let entry = entry(index);
        if entry.state.load(Ordering::SeqCst) != READY || entry_key(entry).0 != database {
            continue;
        }
        entry.reset_at.store(now, Ordering::SeqCst);
        entry.counters.iter().for_each(|c| c.store(0, Ordering::Relaxed));
        entry.errors.iter().for_each(|e| e.count.store(0, Ordering::Relaxed));
        entry.other_errors.store(0, Ordering::Relaxed);
        for latency in [&entry.wait, &entry.run] {
            latency.total.counts.iter().for_each(|c| c.store(0, Ordering::Relaxed));
            latency.total.sum_us.store(0, Ordering::Relaxed);
            for minute in &latency.recent {
                minute.minute.store(0, Ordering::SeqCst);
                minute.counts.iter().for_each(|c| c.store(0, Ordering::Relaxed));
            }
        }
    }
}

/// A copy of one latency histogram: since the last reset, and over the recent window.
pub struct LatencySnapshot {
    pub total: [u64; BUCKETS],
    pub sum_seconds: f64,
    pub recent: [u64; BUCKETS],
}

impl LatencySnapshot {
    pub fn count(&self) -> u64 {
        self.total.iter().sum()
    }

    /// The `p`-quantile of the recent window in seconds; None without samples.
    pub fn recent_quantile(&self, p: f64) -> Option<f64> {
        quantile(&self.recent, p)
    }
}

pub struct QueueSnapshot {
    /// `OTHER_QUEUES` for the entry that counts the queues beyond `pg_jobqueue.stats_max_queues`.
    pub queue_name: String,
    /// When its counting began: the last reset, or the server's start.
    pub counted_since: i64,
    pub counters: [u64; COUNTERS],
    pub errors: Vec<(String, u64)>,
    pub other_errors: u64,
    pub wait: LatencySnapshot,
    pub run: LatencySnapshot,
}

/// Every queue of this database with an entry that `visible` accepts, in name order; the "*" entry
/// last.
pub fn snapshot(visible: impl Fn(&str) -> bool) -> Vec<QueueSnapshot> {
    if !attached() {
        return Vec::new();
    }
    let database = queue_key::database();
    let minute = current_minute();
    let mut queues: Vec<QueueSnapshot> = (0..capacity())
        .filter_map(|index| {
            let entry = entry(index);
            if entry.state.load(Ordering::SeqCst) != READY {
                return None;
            }
            let (entry_database, name) = entry_key(entry);
            let name = String::from_utf8_lossy(name).into_owned();
            if entry_database != database || !visible(&name) {
                return None;
            }
            let counters = entry.counters.each_ref().map(|c| c.load(Ordering::Relaxed));
            let reset_at = entry.reset_at.load(Ordering::SeqCst);
            let errors = entry
                .errors
                .iter()
                .filter(|e| e.state.load(Ordering::SeqCst) == READY)
                // SAFETY: filtered on READY above.
                .map(|e| {
                    (String::from_utf8_lossy(unsafe { e.code.read() }).into_owned(), e.count.load(Ordering::Relaxed))
                })
                .collect();
            Some(QueueSnapshot {
                queue_name: name,
                // SAFETY: the server's start time, set before any backend starts.
                counted_since: if reset_at == 0 { unsafe { pg_sys::PgStartTime } } else { reset_at },
                counters,
                errors,
                other_errors: entry.other_errors.load(Ordering::Relaxed),
                wait: latency_snapshot(&entry.wait, minute),
                run: latency_snapshot(&entry.run, minute),
            })
        })
        .collect();
    queues.sort_by(|a, b| {
        let key = |q: &QueueSnapshot| (q.queue_name == OTHER_QUEUES, q.queue_name.clone());
        key(a).cmp(&key(b))
    });
    queues
}

fn latency_snapshot(latency: &Latency, minute: u64) -> LatencySnapshot {
    let mut recent = [0u64; BUCKETS];
    for slot in &latency.recent {
        let stamp = slot.minute.load(Ordering::SeqCst);
        if stamp != 0 && stamp <= minute && minute - stamp < WINDOW_SPAN {
            for (sum, count) in recent.iter_mut().zip(&slot.counts) {
                *sum += count.load(Ordering::Relaxed);
            }
        }
    }
    LatencySnapshot {
        total: latency.total.counts.each_ref().map(|c| c.load(Ordering::Relaxed)),
        sum_seconds: latency.total.sum_us.load(Ordering::Relaxed) as f64 / 1e6,
        recent,
    }
}
