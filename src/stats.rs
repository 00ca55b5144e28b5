//! Per-queue counters and latency histograms in shared memory (library preloaded only).
//!
//! Counting adds no write and no lock to the hot path: each verb notes what happened in a
//! backend-local list, and when its transaction commits the list is applied to shared memory with
//! atomic additions. A transaction that rolls back counts nothing and takes no entry, so the
//! counters tell what committed. The queue table is a fixed array of `pg_jobqueue.stats_max_queues`
//! entries, each for one queue of one database (queues of the same name in two databases are two
//! queues), filled on first use and never shrunk; entries are found by hash and claimed with a
//! compare-and-swap, so not even that takes a lock. Once it is full, a database's further queues
//! are counted together under queue "*" while an entry for that is left, and not at all after.
//!
//! Latency is kept twice in the same fine histogram (buckets 2^(1/4) apart from 1 ms, so any
//! percentile read from it is within 19% of the true value): once since the last reset, for the
//! Prometheus histogram, and once per minute in a ring of six, for percentiles over the last five
//! minutes.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::{guc, shmem};

/// What is counted, one counter each.
#[derive(Clone, Copy)]
pub enum Counter {
    Claims,
    Completions,
    Failures,
    Retries,
    Deaths,
    LeaseExpirations,
    StaleCompletions,
    StaleHeartbeats,
    Cancellations,
}

pub const COUNTERS: usize = 9;
pub const COUNTER_NAMES: [&str; COUNTERS] = [
    "claims",
    "completions",
    "failures",
    "retries",
    "deaths",
    "lease_expirations",
    "stale_completions",
    "stale_heartbeats",
    "cancellations",
];

/// Fine buckets: 0 holds everything under 1 ms; bucket i >= 1 holds [2^((i-1)/4), 2^(i/4)) ms; the
/// last one is open above (12 days).
pub const BUCKETS: usize = 121;
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
        unsafe {
            (&mut *self.bytes.get())[..len].copy_from_slice(&text[..len]);
            *self.len.get() = len as u32;
        }
    }

    /// Only after the owning state was seen READY.
    unsafe fn read(&self) -> &[u8] {
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
}

static mut HEADER: *mut Header = std::ptr::null_mut();
static mut ENTRIES: *mut Entry = std::ptr::null_mut();

pub fn shared_size() -> usize {
    let capacity = guc::STATS_MAX_QUEUES.get() as usize;
    std::mem::size_of::<Header>() + std::mem::size_of::<Entry>() * capacity
}

/// Attaches the counters (see shmem.rs), zeroed on first use.
pub unsafe fn attach() {
    unsafe {
        let (base, new) = shmem::part(c"pg_jobqueue stats", shared_size());
        if new {
            std::ptr::write_bytes(base.cast::<u8>(), 0, shared_size());
            let header = base.cast::<Header>();
            (*header).capacity = guc::STATS_MAX_QUEUES.get() as u32;
        }
        HEADER = base.cast::<Header>();
        ENTRIES = base.cast::<u8>().add(std::mem::size_of::<Header>()).cast::<Entry>();
    }
}

/// Whether counters are kept: the library was preloaded.
pub fn available() -> bool {
    !unsafe { HEADER }.is_null()
}

/// Whether this session counts: the library was preloaded and `pg_jobqueue.stats` is on.
pub fn counting() -> bool {
    available() && guc::STATS_ENABLED.get()
}

fn capacity() -> usize {
    unsafe { (*HEADER).capacity as usize }
}

fn entry(index: usize) -> &'static Entry {
    unsafe { &*ENTRIES.add(index) }
}

/// The entry of a queue of this database, claimed on first use; the database's "*" entry when the
/// table is full, and None when even that could not be had.
fn entry_index(queue_name: &str) -> Option<usize> {
    if let Some(index) = CACHE.with(|cache| cache.borrow().get(queue_name).copied()) {
        return index;
    }
    let found = find_or_claim(queue_name).or_else(|| find_or_claim(OTHER_QUEUES));
    CACHE.with(|cache| cache.borrow_mut().insert(queue_name.to_owned(), found));
    found
}

/// The label of the entry that counts a database's queues beyond the table's capacity (not a valid
/// queue name, so it cannot be mistaken for one).
pub const OTHER_QUEUES: &str = "*";

fn find_or_claim(queue_name: &str) -> Option<usize> {
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
    let capacity = capacity();
    let mut hasher = DefaultHasher::new();
    (database, queue_name).hash(&mut hasher);
    let start = (hasher.finish() % capacity as u64) as usize;
    for probe in 0..capacity {
        let index = (start + probe) % capacity;
        let entry = entry(index);
        if entry.state.compare_exchange(FREE, WRITING, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
            // SAFETY: this backend moved the state to WRITING.
            unsafe {
                *entry.database.get() = database;
                entry.name.write(queue_name.as_bytes());
            }
            entry.state.store(READY, Ordering::SeqCst);
            return Some(index);
        }
        while entry.state.load(Ordering::SeqCst) == WRITING {
            std::hint::spin_loop();
        }
        if entry_key(entry) == (database, queue_name.as_bytes()) {
            return Some(index);
        }
    }
    None
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

thread_local! {
    /// This session's entry index per queue name (of its one database): entries are never freed,
    /// so it stays right.
    static CACHE: RefCell<HashMap<String, Option<usize>>> = RefCell::new(HashMap::new());
    /// What the current transaction did, applied when it commits.
    static PENDING: RefCell<Vec<(String, Event)>> = const { RefCell::new(Vec::new()) };
    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

fn note(queue_name: &str, event: Event) {
    if !counting() {
        return;
    }
    if !CALLBACK_REGISTERED.get() {
        unsafe { pg_sys::RegisterXactCallback(Some(at_transaction_end), std::ptr::null_mut()) };
        CALLBACK_REGISTERED.set(true);
    }
    PENDING.with(|pending| pending.borrow_mut().push((queue_name.to_owned(), event)));
}

/// How much the current transaction has noted so far, for `forget_since`.
pub fn noted() -> usize {
    PENDING.with(|pending| pending.borrow().len())
}

/// Forgets what was noted since `noted()` said `mark`: a subtransaction that noted it rolled back.
pub fn forget_since(mark: usize) {
    PENDING.with(|pending| pending.borrow_mut().truncate(mark));
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

#[pg_guard]
unsafe extern "C-unwind" fn at_transaction_end(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    let apply = match event {
        pg_sys::XactEvent::XACT_EVENT_COMMIT => true,
        pg_sys::XactEvent::XACT_EVENT_ABORT | pg_sys::XactEvent::XACT_EVENT_PREPARE => false,
        _ => return,
    };
    let events = PENDING.with(|pending| std::mem::take(&mut *pending.borrow_mut()));
    if apply {
        let minute = current_minute();
        for (queue_name, event) in events {
            if let Some(index) = entry_index(&queue_name) {
                apply_event(entry(index), event, minute);
            }
        }
    }
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

pub fn bucket_of(micros: u64) -> usize {
    if micros < 1000 {
        return 0;
    }
    let quarter_octaves = (4.0 * (micros as f64 / 1000.0).log2()).floor() as usize;
    (1 + quarter_octaves).min(BUCKETS - 1)
}

/// The upper bound of a bucket, in seconds (infinite for the last).
pub fn bucket_upper(bucket: usize) -> f64 {
    if bucket == BUCKETS - 1 {
        return f64::INFINITY;
    }
    0.001 * 2f64.powf(bucket as f64 / 4.0)
}

fn bucket_lower(bucket: usize) -> f64 {
    if bucket == 0 { 0.0 } else { bucket_upper(bucket - 1) }
}

fn current_minute() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() / 60).unwrap_or(0)
}

/// Zeroes every counter and histogram of this database's queues. Queue entries and error codes
/// stay where they are.
pub fn reset() {
    if !available() {
        return;
    }
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
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

    /// The `p`-quantile of the recent window in seconds, interpolated within its bucket; None
    /// without samples.
    pub fn recent_quantile(&self, p: f64) -> Option<f64> {
        let total: u64 = self.recent.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = p * total as f64;
        let mut below = 0u64;
        for (bucket, &n) in self.recent.iter().enumerate() {
            if n > 0 && (below + n) as f64 >= rank {
                let upper = bucket_upper(bucket);
                let lower = bucket_lower(bucket);
                if upper.is_infinite() {
                    return Some(lower);
                }
                let within = ((rank - below as f64) / n as f64).clamp(0.0, 1.0);
                return Some(lower + (upper - lower) * within);
            }
            below += n;
        }
        None
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
    if !available() {
        return Vec::new();
    }
    let database = unsafe { pg_sys::MyDatabaseId }.to_u32();
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
                .map(|e| (String::from_utf8_lossy(unsafe { e.code.read() }).into_owned(), e.count.load(Ordering::Relaxed)))
                .collect();
            Some(QueueSnapshot {
                queue_name: name,
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
