//! The claim front: per queue, a key in claim order below which no job is claimable, so that a
//! claim starts its index walk there instead of at the queue's first entry (guide, "Old
//! snapshots").
//!
//! Why: a claimed job leaves the claim index only when vacuum removes its old entry, and vacuum
//! cannot while any snapshot older than the claim is held. A claim then visits every job claimed
//! since that snapshot, entry by entry, before it finds a pending one: the longer a report or a
//! forgotten transaction holds its snapshot, the slower every claim. The front skips them.
//!
//! The rule that keeps it safe: every committed pending job that no transaction holds locked has a
//! key at or above its queue's front. So
//! - whatever makes a job pending lowers the front to the job's key, after its commit is visible
//!   (enqueue, a retry after failure), or forgets it (re-drive, lease expiry, a cancel that rolls
//!   back: rare, and their keys are not at hand); a claim that rolls back lowers it to the keys it
//!   had locked;
//! - a claim moves the front up only to a key it has proved: the lowest key it claimed in priority
//!   order, when that is on the front's priority (every row between is then due and was seen by the
//!   claim: running, locked by another claim, or committed too late for its snapshot); otherwise a
//!   look from the front for the first pending key (`claim_front.sql`);
//! - a move up is checked against every lowering since the claim read the front (`seq`, and the
//!   last RECENT lowerings with their keys): it never passes a job made pending meanwhile;
//! - queues whose jobs use ordering keys do not move: a keyed job waiting for its predecessor stays
//!   pending behind the claims that passed it. Their claims walk from the start, as with no front;
//! - whatever changes jobs outside the jq_* functions (an operator's UPDATE, a restore) is found by
//!   the look from the start that each queue's front takes about once a second while it is claimed
//!   from (the first claim a second after the last such look takes the next).
//!
//! Slots: each queue may use four of the table's slots, picked by its hash, which is seeded with
//! the server's secret (`queue_key`), so nobody can name queues that land on another's four. A
//! slot holds one queue's whole key (database and name): a queue uses the first of its four it
//! holds, and one that holds none takes one of them that is free or whose queue's claims have left
//! it alone for a second (starting from the bottom). Taking follows the share rule of `queue_key`:
//! a role takes a slot only while it holds fewer busy slots (in its database) than are free, and a
//! database only while it holds fewer than twice as many, so no role can keep every slot busy with
//! queues of its own. A queue that finds none walks from the start, as with no front, and tries
//! again a second later: a refusal (`queue_key`), logged once and counted in `jq_metrics()`. Busy
//! queues competing for slots cost some of them the skip, never a job: whatever makes a job pending
//! lowers (or forgets) every slot its queue holds, and a claim moves only the slot it read.
//!
//! Where the slots live: in the server's shared memory when the library is preloaded; otherwise in
//! a segment of their own (`segment`), with the queue keys' seed, attached by each backend the first
//! time it claims or makes a job pending. Every path that makes a job pending attaches before it
//! notes its lowering, so no lowering is lost to a backend that was not yet attached.
//! Jobs made pending by a prepared transaction (whose commit may come in another session) are
//! found by the look from the start, like those changed outside the functions.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use pgrx::pg_sys;

use super::queue_key::{self, Table};
use super::{segment, xact};

const SLOTS: usize = 1024;

/// The slots a queue may use.
const CHOICES: usize = 4;

/// How many lowerings a slot remembers: a claim whose read of the front is older than this many
/// lowerings does not move it.
const RECENT: usize = 16;

/// How long a front may go without a look from the start (microseconds).
const FULL_LOOK_EVERY: i64 = 1_000_000;

/// How long a look that found the same front again waits before the next (microseconds).
const LOOK_AGAIN_AFTER: i64 = 10_000;
/// The longest a fairness bound holds before a claim runs the check again (microseconds).
const FAIR_RECHECK: i64 = 1_000_000;

/// A place in claim order: `priority DESC, available_at, id`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Key {
    pub priority: i32,
    pub available_at: pg_sys::TimestampTz,
    pub id: i64,
}

impl Key {
    /// Before every job: the front of a queue nothing is known of.
    pub const BOTTOM: Key = Key { priority: i32::MAX, available_at: i64::MIN, id: i64::MIN };
    /// After every job: the front of a queue with no pending job.
    pub const TOP: Key = Key { priority: i32::MIN, available_at: i64::MAX, id: i64::MAX };

    fn order(&self) -> (std::cmp::Reverse<i32>, i64, i64) {
        (std::cmp::Reverse(self.priority), self.available_at, self.id)
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order().cmp(&other.order())
    }
}

const EMPTY: u8 = 0;
const MARKED: u8 = 1;
const KEYED: u8 = 2;

#[repr(C)]
#[derive(Clone, Copy)]
struct Lowering {
    seq: u64,
    key: Key,
    keyed: bool,
    /// A forget: jobs of unknown keys, maybe with ordering keys, became pending.
    forgot: bool,
}

/// One queue's front. Every field but `lock` is read and written only under `lock`.
#[repr(C)]
struct Slot {
    lock: AtomicU32,
    state: u8,
    name_len: u8,
    database: u32,
    /// The role whose claim took the slot, for the share rule.
    role: u32,
    name: [u8; 64],
    seq: u64,
    mark: Key,
    /// No look from the front before this time.
    look_after: pg_sys::TimestampTz,
    /// When the front last came from a look from the start.
    looked_from_bottom: pg_sys::TimestampTz,
    /// When a claim of the owning queue last read it.
    last_read: pg_sys::TimestampTz,
    /// The fairness bound (guide, "Fairness"): before this time no pending job of the queue can
    /// have waited past its starvation limit, so claims may leave out the fairness check.
    /// `i64::MIN`: not known.
    fair_until: pg_sys::TimestampTz,
    /// The starvation limit (microseconds) the bound was computed with: a job made pending at
    /// `available_at` brings the bound down to `available_at + fair_limit`.
    fair_limit: i64,
    /// Whether the bound was set because every pending job had one priority, `fair_priority`
    /// (zeroed memory: no). Claim order then takes starving jobs first by itself, whatever their
    /// age; a job made pending with another priority ends the bound at once.
    fair_by_priority: bool,
    fair_priority: i32,
    recent: [Lowering; RECENT],
}

/// What a claim read of its queue's front, before its snapshot was taken.
#[derive(Clone, Copy, Debug)]
pub struct Seen {
    /// The slot read: only it may be moved by what the claim proves.
    slot: usize,
    seq: u64,
    /// Where the claim starts: the front, or BOTTOM for a queue whose front does not move.
    pub mark: Key,
    pub keyed: bool,
    /// Whether a look from the front may run now.
    pub look_due: bool,
    /// Whether the front is due for a look from the start.
    pub full_look_due: bool,
    /// Whether no pending job can be starving now (the fairness bound is ahead).
    pub fair: bool,
}

impl Slot {
    fn owns(&self, database: u32, queue_name: &str) -> bool {
        self.state != EMPTY
            && self.database == database
            && &self.name[..usize::from(self.name_len)] == queue_name.as_bytes()
    }

    /// Whether another queue may take the slot: it is empty, or its queue's claims have not read it
    /// for a while.
    fn may_be_taken(&self, now: pg_sys::TimestampTz) -> bool {
        self.state == EMPTY || now.saturating_sub(self.last_read) > FULL_LOOK_EVERY
    }

    fn take(&mut self, database: u32, queue_name: &str) {
        let name = queue_name.as_bytes();
        let len = name.len().min(self.name.len());
        self.name[..len].copy_from_slice(&name[..len]);
        self.name_len = len as u8;
        self.database = database;
        self.state = MARKED;
        self.mark = Key::BOTTOM;
        self.look_after = i64::MIN;
        // Readers of the queue that had the slot before must not move this one.
        self.forget();
    }

    fn read(&mut self, now: pg_sys::TimestampTz) -> Seen {
        self.last_read = now;
        let keyed = self.state == KEYED;
        Seen {
            slot: 0,
            seq: self.seq,
            mark: if keyed { Key::BOTTOM } else { self.mark },
            keyed,
            look_due: now >= self.look_after,
            full_look_due: now.saturating_sub(self.looked_from_bottom) > FULL_LOOK_EVERY,
            fair: now < self.fair_until,
        }
    }

    fn lower(&mut self, key: Key, keyed: bool) {
        self.remember(Lowering { seq: 0, key, keyed, forgot: false });
        if !self.fair_by_priority {
            self.fair_until = self.fair_until.min(key.available_at.saturating_add(self.fair_limit));
        } else if key.priority != self.fair_priority {
            self.fair_until = i64::MIN;
            self.fair_by_priority = false;
        }
        if keyed {
            self.state = KEYED;
        } else if self.state == MARKED && key < self.mark {
            self.mark = key;
        }
    }

    /// Back to the bottom, and not to move again before a look from the start: jobs became pending
    /// whose keys, and whether they have ordering keys, are not known.
    fn forget(&mut self) {
        self.remember(Lowering { seq: 0, key: Key::BOTTOM, keyed: false, forgot: true });
        if self.state == MARKED {
            self.mark = Key::BOTTOM;
        }
        self.looked_from_bottom = i64::MIN;
        self.fair_until = i64::MIN;
        self.fair_by_priority = false;
    }

    fn remember(&mut self, mut lowering: Lowering) {
        self.seq += 1;
        lowering.seq = self.seq;
        self.recent[(self.seq % RECENT as u64) as usize] = lowering;
        self.look_after = i64::MIN;
    }

    /// The lowest key lowered to since `seen` and whether a keyed job came; None when too many
    /// lowerings came to tell, or a forget.
    fn lowered_since(&self, seen: &Seen) -> Option<(Key, bool)> {
        let since = self.seq.checked_sub(seen.seq)?;
        if since > RECENT as u64 {
            return None;
        }
        let mut low = (Key::TOP, false);
        for seq in seen.seq + 1..=self.seq {
            let lowering = self.recent[(seq % RECENT as u64) as usize];
            if lowering.forgot {
                return None;
            }
            low = (low.0.min(lowering.key), low.1 || lowering.keyed);
        }
        Some(low)
    }

    /// The oldest `available_at` of the jobs lowered to since `seen`; None when too many came to
    /// tell, or a forget. `i64::MAX` when none came.
    fn oldest_lowered_since(&self, seen: &Seen) -> Option<i64> {
        let since = self.seq.checked_sub(seen.seq)?;
        if since > RECENT as u64 {
            return None;
        }
        let mut oldest = i64::MAX;
        for seq in seen.seq + 1..=self.seq {
            let lowering = self.recent[(seq % RECENT as u64) as usize];
            if lowering.forgot {
                return None;
            }
            oldest = oldest.min(lowering.key.available_at);
        }
        Some(oldest)
    }

    /// Whether every job lowered to since `seen` has the priority `priority`; false when too many
    /// came to tell, or a forget.
    fn lowered_since_all_of(&self, seen: &Seen, priority: i32) -> bool {
        let Some(since) = self.seq.checked_sub(seen.seq) else {
            return false;
        };
        since <= RECENT as u64
            && (seen.seq + 1..=self.seq).all(|seq| {
                let lowering = self.recent[(seq % RECENT as u64) as usize];
                !lowering.forgot && lowering.key.priority == priority
            })
    }

    /// A claim that read `seen` ran the fairness check: the oldest pending job its snapshot saw
    /// (None: none), with the starvation limit (None: no limit), and the one priority of every
    /// pending job it saw (None: more than one, or none). The bound is then the oldest of those
    /// and of every job lowered to since, plus the limit; or, when every pending job has one
    /// priority (those lowered to since too), whatever their age, since claim order then takes
    /// the oldest first. Never more than FAIR_RECHECK ahead, which bounds how late a change of
    /// the setting, or a job made pending outside the functions, is seen.
    fn set_fair(&mut self, seen: &Seen, fairness: Fairness, now: pg_sys::TimestampTz) {
        let Some(lowered) = self.oldest_lowered_since(seen) else {
            return;
        };
        let limit = fairness.limit.unwrap_or(i64::MAX);
        self.fair_limit = limit;
        let recheck = now.saturating_add(FAIR_RECHECK);
        match fairness.one_priority {
            Some(priority) if self.lowered_since_all_of(seen, priority) => {
                self.fair_by_priority = true;
                self.fair_priority = priority;
                self.fair_until = recheck;
            }
            _ => {
                let oldest = fairness.oldest.unwrap_or(i64::MAX).min(lowered);
                self.fair_by_priority = false;
                self.fair_until = oldest.saturating_add(limit).min(recheck);
            }
        }
    }

    /// A claim proved that nothing unlocked is pending below `to` (as of its read `seen`).
    fn advance(&mut self, seen: &Seen, to: Key) {
        if self.state != MARKED || seen.full_look_due {
            return;
        }
        if let Some((low, false)) = self.lowered_since(seen) {
            self.mark = self.mark.max(to.min(low));
        }
    }

    /// A look found `found` (TOP: nothing) to be the first pending key from where it looked.
    fn install(&mut self, seen: &Seen, found: Key, keyed: bool, from_bottom: bool, now: pg_sys::TimestampTz) {
        let Some((low, keyed_since)) = self.lowered_since(seen) else {
            return;
        };
        if !from_bottom && seen.full_look_due {
            return;
        }
        if from_bottom {
            self.looked_from_bottom = now;
        }
        if keyed || keyed_since {
            self.state = KEYED;
            return;
        }
        // What the look proved, even below the front: a look from the start is how a job made
        // pending outside the jq_* functions is found.
        let before = self.mark;
        self.mark = found.min(low);
        self.state = MARKED;
        self.look_after = if self.mark.available_at > now {
            // The front is a job not yet due: nothing above it can be proved before then.
            self.mark.available_at
        } else if self.mark == before {
            now.saturating_add(LOOK_AGAIN_AFTER)
        } else {
            i64::MIN
        };
    }
}

/// The slot array in shared memory, then a tag per slot; null until the process attaches the
/// server's shared memory (preloaded) or the fronts' segment (`segment`, without preload). Set
/// once per process, read-only afterwards.
static mut SHARED: *mut Slot = std::ptr::null_mut();
/// Per slot, its queue's tag (`tag_of` its hash; 0: none), read without the slot's lock to find a
/// queue's slot before locking it. Written under the slot's lock.
static mut TAGS: *mut AtomicU64 = std::ptr::null_mut();

pub fn shared_size() -> usize {
    (std::mem::size_of::<Slot>() + std::mem::size_of::<AtomicU64>()) * SLOTS
}

/// Takes the fronts' part of shared memory (`shared_size()` bytes at `base`), zeroed (every slot
/// empty and untagged) when `new`. Only from the shared-memory startup hook, or once the fronts'
/// segment is attached.
pub unsafe fn attach(base: *mut u8, new: bool) {
    // SAFETY: `base` holds SLOTS slots, then SLOTS tags (a slot's size is a multiple of 8, so the
    // tags are aligned), and zero bytes are an empty, unlocked slot and no tag; the pointers are
    // written once per process, before any SQL function of it runs.
    unsafe {
        if new {
            std::ptr::write_bytes(base, 0, shared_size());
        }
        SHARED = base.cast();
        TAGS = base.add(std::mem::size_of::<Slot>() * SLOTS).cast();
    }
}

fn attached() -> bool {
    // SAFETY: read-only after startup.
    !unsafe { SHARED }.is_null()
}

/// Whether the fronts are in shared memory, attaching their segment on first use without preload:
/// the queue keys' part (whose seed the fronts hash with), then the slots. Only where a claim or
/// a change of jobs runs, never at commit.
fn available() -> bool {
    if attached() {
        return true;
    }
    if crate::guc::preloaded() {
        // Preloaded, the fronts' part of the server's shared memory was attached at startup: not
        // attached means the postmaster never made it, and a segment would split the queues.
        return false;
    }
    let keys = queue_key::shared_size().next_multiple_of(64);
    segment::attach(keys + shared_size(), layout(), |base, new| {
        // SAFETY: `base` holds `keys` bytes for the queue keys' part, then the slots' part, and
        // this runs once per process, before its first use of either.
        unsafe {
            queue_key::attach(base, new);
            attach(base.add(keys), new);
        }
    })
}

/// Whether the claim fronts are in shared memory, for their refusals in `jq_metrics()`: attaches
/// their segment without preload as a claim would (making it, if no backend has yet).
pub fn in_shared_memory() -> bool {
    available()
}

/// What a segment made by another build must match to be shared: the sizes of both parts, and a
/// version to raise when a field's meaning changes without its size.
fn layout() -> u64 {
    const VERSION: u64 = 1;
    (VERSION << 56) ^ ((queue_key::shared_size() as u64) << 28) ^ (shared_size() as u64)
}

/// Never 0, which marks a slot without a queue.
fn tag_of(hash: u64) -> u64 {
    hash.max(1)
}

fn tag(index: usize) -> &'static AtomicU64 {
    // SAFETY: only once attached, with an index below SLOTS; tags live as long as the server.
    unsafe { &*TAGS.add(index) }
}

/// The slots a queue with this hash may use, each once: from four independent bits of the hash.
fn candidates(hash: u64) -> impl Iterator<Item = usize> {
    let all: [usize; CHOICES] = std::array::from_fn(|i| ((hash >> (16 * i)) & 0xffff) as usize % SLOTS);
    all.into_iter().enumerate().filter(move |(i, index)| !all[..*i].contains(index)).map(|(_, index)| index)
}

/// Runs `f` on slot `index` under its lock. Only once attached, with an index below SLOTS.
fn locked<R>(index: usize, f: impl FnOnce(&mut Slot) -> R) -> R {
    // SAFETY: as the caller promises; slots live as long as the server.
    let slot = unsafe { &mut *SHARED.add(index) };
    let mut spins = 0u32;
    while slot.lock.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
        spins += 1;
        if spins < 100 {
            std::hint::spin_loop();
        } else {
            // The holder may have lost its CPU in the middle (two cores, many backends): let it run
            // rather than spin through the rest of this time slice.
            std::thread::yield_now();
        }
    }
    // Under the lock, which only this code takes, for a few field copies that cannot fail: no other
    // process touches the slot's fields meanwhile.
    let result = f(slot);
    slot.lock.store(0, Ordering::Release);
    result
}

/// The slots among the queue's candidates that it holds, in the order of its candidates (usually
/// one; two if two sessions took one each at once).
fn held_by(queue_name: &str) -> Vec<usize> {
    if !attached() {
        return Vec::new();
    }
    let hash = queue_key::hash(queue_name);
    let (want, database) = (tag_of(hash), queue_key::database());
    candidates(hash)
        .filter(|index| tag(*index).load(Ordering::SeqCst) == want)
        .filter(|index| locked(*index, |slot| slot.owns(database, queue_name)))
        .collect()
}

/// Runs `f` on each slot the queue holds, under the slot's lock.
fn each_held(queue_name: &str, mut f: impl FnMut(&mut Slot)) {
    let database = queue_key::database();
    for index in held_by(queue_name) {
        locked(index, |slot| {
            if slot.owns(database, queue_name) {
                f(slot);
            }
        });
    }
}

/// Runs `f` on the slot a claim read (`seen`), if the queue still holds it.
fn with_read_slot(queue_name: &str, seen: &Seen, f: impl FnOnce(&mut Slot)) {
    if !attached() {
        return;
    }
    let database = queue_key::database();
    locked(seen.slot, |slot| {
        if slot.owns(database, queue_name) {
            f(slot);
        }
    });
}

/// Reads the queue's front, taking a slot for it if it holds none. None without shared memory, or
/// when it finds no slot. To be called before the claim's statement takes its snapshot.
pub fn read(queue_name: &str, now: pg_sys::TimestampTz) -> Option<Seen> {
    if !available() {
        return None;
    }
    let seen = read_slot(queue_name, now)?;
    // Jobs this transaction made pending lower the front only when it commits, but its own claims
    // see them now: they start below them.
    let mark = made_here(queue_name).map_or(seen.mark, |here| seen.mark.min(here));
    Some(Seen { mark, ..seen })
}

/// The queue's slot, read (or taken); None when it finds none.
fn read_slot(queue_name: &str, now: pg_sys::TimestampTz) -> Option<Seen> {
    let hash = queue_key::hash(queue_name);
    let (want, database) = (tag_of(hash), queue_key::database());
    for index in candidates(hash).filter(|index| tag(*index).load(Ordering::SeqCst) == want) {
        let seen = locked(index, |slot| slot.owns(database, queue_name).then(|| slot.read(now)));
        if let Some(seen) = seen {
            return Some(Seen { slot: index, ..seen });
        }
    }
    if REFUSED.with(|refused| refused.borrow().get(queue_name).is_some_and(|until| now < *until)) {
        return None;
    }
    take(queue_name, now).or_else(|| {
        refuse(queue_name, now);
        None
    })
}

/// Takes one of the queue's candidates that is free, or whose queue's claims left it alone, if
/// the share rule lets the caller's role take one.
fn take(queue_name: &str, now: pg_sys::TimestampTz) -> Option<Seen> {
    let hash = queue_key::hash(queue_name);
    let database = queue_key::database();
    let role = crate::rights::caller().to_u32();
    let takeable: Vec<usize> = candidates(hash).filter(|index| locked(*index, |slot| slot.may_be_taken(now))).collect();
    if takeable.is_empty() {
        return None;
    }
    let (mut free, mut role_held, mut database_held) = (0, 0, 0);
    for index in 0..SLOTS {
        let (takeable, held_database, held_role) =
            locked(index, |slot| (slot.may_be_taken(now), slot.database, slot.role));
        if takeable {
            free += 1;
        } else if held_database == database {
            database_held += 1;
            role_held += usize::from(held_role == role);
        }
    }
    if !queue_key::may_take(role_held, database_held, free) {
        return None;
    }
    takeable.into_iter().find_map(|index| {
        locked(index, |slot| {
            if !slot.owns(database, queue_name) {
                if !slot.may_be_taken(now) {
                    return None;
                }
                slot.take(database, queue_name);
                slot.role = role;
                tag(index).store(tag_of(hash), Ordering::SeqCst);
            }
            Some(Seen { slot: index, ..slot.read(now) })
        })
    })
}

/// The queue found no slot: its claims in this session walk from the start for a second, and the
/// first such refusal of each queue in a session is counted (`queue_key`).
fn refuse(queue_name: &str, now: pg_sys::TimestampTz) {
    let first = REFUSED.with(|refused| {
        let mut refused = refused.borrow_mut();
        if refused.len() >= SESSION_FAIR_QUEUES && !refused.contains_key(queue_name) {
            refused.clear();
        }
        refused.insert(queue_name.to_owned(), now.saturating_add(FULL_LOOK_EVERY)).is_none()
    });
    if first {
        queue_key::refused(Table::ClaimFronts, || {
            format!(
                "pg_jobqueue: queue \"{queue_name}\" found no claim front: the slots it may use are busy with \
                 other queues, or its role or database holds its share of them; its claims walk from the queue's \
                 start until it finds one (further such queues of this database are only counted, in \
                 jq_shared_slots_refused_total)"
            )
        });
    }
}

/// A claim that read `seen` found nothing unlocked pending below `to`, on the front's priority.
pub fn advance(queue_name: &str, seen: &Seen, to: Key) {
    with_read_slot(queue_name, seen, |slot| slot.advance(seen, to));
}

/// A look, after the read `seen`, found `found` (TOP: nothing) to be the first pending key from
/// where it looked, and whether jobs with ordering keys are live.
pub fn install(queue_name: &str, seen: &Seen, found: Key, keyed: bool, from_bottom: bool, now: pg_sys::TimestampTz) {
    with_read_slot(queue_name, seen, |slot| slot.install(seen, found, keyed, from_bottom, now));
}

/// What a claim's fairness check saw.
#[derive(Clone, Copy, Debug, Default)]
pub struct Fairness {
    /// The oldest pending job's `available_at` (None: none), in microseconds.
    pub oldest: Option<i64>,
    /// The starvation limit (None: none), in microseconds.
    pub limit: Option<i64>,
    /// The priority every pending job has (None: more than one, or none).
    pub one_priority: Option<i32>,
}

/// A claim that read `seen` ran the fairness check, which saw `fairness`.
pub fn set_fair(queue_name: &str, seen: &Seen, fairness: Fairness, now: pg_sys::TimestampTz) {
    with_read_slot(queue_name, seen, |slot| slot.set_fair(seen, fairness, now));
}

thread_local! {
    /// Without shared memory (no preload), each session keeps its own fairness bound per queue,
    /// from its own checks. It cannot hear of the jobs other sessions make pending; those have an
    /// `available_at` of their own time or later, so they cannot starve before the bound, taken
    /// from the older of the oldest job seen and the check's time. A job enqueued with a `run_at`
    /// long past, or set by hand, is seen within FAIR_RECHECK.
    static SESSION_FAIR: RefCell<HashMap<String, pg_sys::TimestampTz>> = RefCell::new(HashMap::new());
    /// Queues that found no slot in this session, and until when their claims do not look for one.
    static REFUSED: RefCell<HashMap<String, pg_sys::TimestampTz>> = RefCell::new(HashMap::new());
}

/// The most queues a session keeps a bound for; past it, it forgets them all.
const SESSION_FAIR_QUEUES: usize = 1024;

/// Without shared memory: whether this session's bound says no job of the queue can be starving.
pub fn session_fair(queue_name: &str, now: pg_sys::TimestampTz) -> bool {
    SESSION_FAIR.with(|bounds| bounds.borrow().get(queue_name).is_some_and(|until| now < *until))
}

/// Without shared memory: a claim of this session ran the fairness check (see `set_fair`).
pub fn set_session_fair(queue_name: &str, oldest: Option<i64>, limit: Option<i64>, now: pg_sys::TimestampTz) {
    let from = oldest.unwrap_or(i64::MAX).min(now);
    let until = from.saturating_add(limit.unwrap_or(i64::MAX)).min(now.saturating_add(FAIR_RECHECK));
    SESSION_FAIR.with(|bounds| {
        let mut bounds = bounds.borrow_mut();
        if bounds.len() >= SESSION_FAIR_QUEUES && !bounds.contains_key(queue_name) {
            bounds.clear();
        }
        bounds.insert(queue_name.to_owned(), until);
    });
}

/// Every slot the queue holds, not only the one its claims read: a slot held twice must keep the
/// rule too, in case the other is lost and this one read again.
fn lower(queue_name: &str, key: Key, keyed: bool) {
    each_held(queue_name, |slot| slot.lower(key, keyed));
}

thread_local! {
    /// The lowest key the current transaction made pending in each queue (BOTTOM: keys not at
    /// hand), tagged with the transaction (`xact::this_transaction`): what its own claims must
    /// start from before its commit lowers the front.
    static MADE_HERE: RefCell<(u32, HashMap<String, Key>)> = RefCell::new((0, HashMap::new()));
}

/// The current transaction made a job of the queue pending at `key`.
fn note_made_here(queue_name: &str, key: Key) {
    MADE_HERE.with(|made| {
        let mut made = made.borrow_mut();
        let transaction = xact::this_transaction();
        if made.0 != transaction {
            *made = (transaction, HashMap::new());
        }
        let low = made.1.entry(queue_name.to_owned()).or_insert(key);
        *low = (*low).min(key);
    });
}

/// The lowest key the current transaction made pending in the queue, if any.
fn made_here(queue_name: &str) -> Option<Key> {
    MADE_HERE.with(|made| {
        let made = made.borrow();
        (made.0 == xact::this_transaction()).then(|| made.1.get(queue_name).copied()).flatten()
    })
}

/// The transaction made a job pending at `key` (with an ordering key: `keyed`): once it commits,
/// the front is at or below it.
pub fn lower_at_commit(queue_name: &str, key: Key, keyed: bool) {
    if available() {
        note_made_here(queue_name, if keyed { Key::BOTTOM } else { key });
        let queue_name = queue_name.to_owned();
        xact::at_commit(move || lower(&queue_name, key, keyed));
    }
}

/// The transaction made jobs of the queue pending whose keys are not at hand: once it commits,
/// the front is back at the bottom until a look from the start.
pub fn forget_at_commit(queue_name: &str) {
    if available() {
        note_made_here(queue_name, Key::BOTTOM);
        let queue_name = queue_name.to_owned();
        xact::at_commit(move || forget(&queue_name));
    }
}

/// The (sub)transaction locked jobs of the queue that are pending again if it rolls back.
pub fn forget_at_rollback(queue_name: &str) {
    if available() {
        let queue_name = queue_name.to_owned();
        xact::at_rollback(move || forget(&queue_name));
    }
}

fn forget(queue_name: &str) {
    each_held(queue_name, |slot| slot.forget());
}

/// The (sub)transaction locked pending jobs, the lowest at `key`; if it rolls back they are
/// pending again, and claims may have moved the front past them meanwhile.
pub fn lower_at_rollback(queue_name: &str, key: Key) {
    if available() {
        let queue_name = queue_name.to_owned();
        xact::at_rollback(move || lower(&queue_name, key, false));
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use super::{Fairness, Key, Lowering, Slot, EMPTY, KEYED, MARKED, RECENT};

    fn key(priority: i32, available_at: i64, id: i64) -> Key {
        Key { priority, available_at, id }
    }

    fn slot() -> Slot {
        let mut slot = Slot {
            lock: Default::default(),
            state: EMPTY,
            name_len: 0,
            database: 0,
            role: 0,
            name: [0; 64],
            seq: 0,
            mark: Key::BOTTOM,
            look_after: 0,
            looked_from_bottom: 0,
            last_read: 0,
            fair_until: 0,
            fair_limit: 0,
            fair_by_priority: false,
            fair_priority: 0,
            recent: [Lowering { seq: 0, key: Key::BOTTOM, keyed: false, forgot: false }; RECENT],
        };
        slot.take(1, "q");
        slot
    }

    /// The fairness bound: the oldest pending job the check saw plus the limit, brought down by
    /// every job made pending since the check's read, at most FAIR_RECHECK ahead, and gone after
    /// a forget.
    #[pg_test]
    fn the_fairness_bound_is_the_oldest_job_seen_or_lowered_plus_the_limit() {
        let mut front = slot();
        assert!(!front.read(0).fair, "not known before a check");
        let seen = front.read(0);
        front.set_fair(&seen, fairness(Some(1_000), Some(500), None), 1_000);
        assert_eq!(front.fair_until, 1_500);
        assert!(front.read(1_499).fair && !front.read(1_500).fair);

        // A job older than the check saw, made pending after the check's read.
        let seen = front.read(1_000);
        front.lower(key(0, 800, 1), false);
        front.set_fair(&seen, fairness(Some(1_000), Some(500), None), 1_000);
        assert_eq!(front.fair_until, 1_300, "the lowering counts though it came after the read");
        front.lower(key(0, 700, 2), false);
        assert_eq!(front.fair_until, 1_200, "and one after the check brings it down at once");

        // No limit, no pending job: held for FAIR_RECHECK only.
        let seen = front.read(2_000);
        front.set_fair(&seen, fairness(None, None, None), 2_000);
        assert_eq!(front.fair_until, 2_000 + super::FAIR_RECHECK);

        // Jobs of unknown keys: not known again until the next check.
        let seen = front.read(2_000);
        front.forget();
        assert!(!front.read(2_001).fair);
        front.set_fair(&seen, fairness(Some(5_000), Some(500), None), 2_001);
        assert!(!front.read(2_001).fair, "a check that read before the forget proves nothing");
    }

    fn fairness(oldest: Option<i64>, limit: Option<i64>, one_priority: Option<i32>) -> Fairness {
        Fairness { oldest, limit, one_priority }
    }

    /// When every pending job has one priority, the bound holds whatever their age (claim order
    /// takes the oldest first), for FAIR_RECHECK, until a job of another priority is made pending,
    /// or one was since the check's read.
    #[pg_test]
    fn one_priority_keeps_the_bound_until_another_priority_comes() {
        let mut front = slot();
        let seen = front.read(10_000);
        front.set_fair(&seen, fairness(Some(1_000), Some(500), Some(3)), 10_000);
        assert!(front.read(10_001).fair, "starving, but all of priority 3");
        assert_eq!(front.fair_until, 10_000 + super::FAIR_RECHECK);
        front.lower(key(3, 100, 7), false);
        assert!(front.read(10_002).fair, "an old job of the same priority changes nothing");
        front.lower(key(4, 10_002, 8), false);
        assert!(!front.read(10_003).fair, "a job of another priority ends it at once");

        let seen = front.read(20_000);
        front.lower(key(1, 20_000, 9), false);
        front.set_fair(&seen, fairness(Some(1_000), Some(500), Some(3)), 20_000);
        assert!(!front.read(20_001).fair, "another priority came after the check's read");
        let seen = front.read(30_000);
        front.set_fair(&seen, fairness(Some(1_000), Some(500), None), 30_000);
        assert!(!front.read(30_001).fair, "two priorities, and a job past its limit");
    }

    #[pg_test]
    fn keys_follow_claim_order() {
        assert!(key(5, 100, 1) < key(1, 0, 0), "a higher priority comes first");
        assert!(key(1, 10, 9) < key(1, 20, 1), "then the earlier available_at");
        assert!(key(1, 10, 1) < key(1, 10, 2), "then the lower id");
        assert!(Key::BOTTOM < key(i32::MAX, i64::MIN + 1, 0) && key(i32::MIN, i64::MAX, i64::MAX - 1) < Key::TOP);
    }

    #[pg_test]
    fn a_claim_moves_the_front_only_past_what_nobody_lowered_meanwhile() {
        let mut front = slot();
        let seen = front.read(0);
        front.install(&seen, key(0, 10, 1), false, true, 0);
        assert_eq!(front.mark, key(0, 10, 1));

        let seen = front.read(0);
        front.advance(&seen, key(0, 50, 5));
        assert_eq!(front.mark, key(0, 50, 5));

        // An enqueue below where the next claim would move it commits after that claim's read.
        let seen = front.read(0);
        front.lower(key(0, 60, 6), false);
        front.lower(key(0, 20, 7), false);
        assert_eq!(front.mark, key(0, 20, 7), "a lowering takes effect at once");
        front.advance(&seen, key(0, 90, 9));
        assert_eq!(front.mark, key(0, 20, 7), "the claim cannot pass the job made pending after its read");

        // A claim that read after the lowering may pass it.
        let seen = front.read(0);
        front.advance(&seen, key(0, 90, 9));
        assert_eq!(front.mark, key(0, 90, 9));

        // Never down: a slower claim's lower proof does not undo a higher one.
        front.advance(&seen, key(0, 70, 1));
        assert_eq!(front.mark, key(0, 90, 9));

        // A job made pending above the front after the claim's read leaves the mark where it is,
        // so only the claim's own check stops it there.
        let seen = front.read(0);
        front.lower(key(0, 95, 3), false);
        assert_eq!(front.mark, key(0, 90, 9), "a lowering above the front does not move it");
        front.advance(&seen, key(0, 99, 4));
        assert_eq!(front.mark, key(0, 95, 3), "the claim stops at the job made pending after its read");
    }

    #[pg_test]
    fn a_read_older_than_the_remembered_lowerings_moves_nothing() {
        let mut front = slot();
        let seen = front.read(0);
        for _ in 0..=RECENT {
            front.lower(Key::TOP, false);
        }
        front.install(&seen, key(0, 10, 1), false, true, 0);
        front.advance(&seen, key(0, 10, 1));
        assert_eq!(front.mark, Key::BOTTOM);
    }

    #[pg_test]
    fn a_keyed_job_stops_the_front_until_a_look_finds_none() {
        let mut front = slot();
        let seen = front.read(0);
        front.lower(key(0, 10, 1), true);
        assert_eq!(front.state, KEYED, "a keyed enqueue stops the front at once");
        assert!(front.read(0).keyed, "and every claim that reads it after");
        front.install(&seen, key(0, 10, 1), false, true, 0);
        assert_eq!(front.state, KEYED, "a keyed enqueue after the read wins over the look");

        // The look's own check alone: a read before a keyed enqueue proves nothing, even where
        // the front was marked again since.
        let mut front = slot();
        let seen = front.read(0);
        front.lower(key(0, 10, 1), true);
        front.state = MARKED;
        front.install(&seen, key(0, 10, 1), false, true, 0);
        assert_eq!(front.state, KEYED, "a look that read before a keyed enqueue cannot mark the front");
        let seen = front.read(0);
        assert!(seen.keyed && seen.mark == Key::BOTTOM, "claims of a keyed queue start from the bottom");
        front.advance(&seen, key(0, 50, 5));
        assert_eq!(front.state, KEYED);
        front.install(&seen, key(0, 50, 5), false, true, 0);
        assert_eq!((front.state, front.mark), (MARKED, key(0, 50, 5)));
    }

    #[pg_test]
    fn a_slot_taken_over_forgets_the_other_queues_front() {
        let mut front = slot();
        let seen = front.read(0);
        front.install(&seen, key(0, 10, 1), false, true, 0);
        assert!(front.owns(1, "q") && !front.owns(1, "r") && !front.owns(2, "q"));
        assert!(!front.may_be_taken(super::FULL_LOOK_EVERY), "its queue read it a moment ago");
        assert!(front.may_be_taken(super::FULL_LOOK_EVERY + 1));
        front.take(1, "r");
        assert_eq!(front.mark, Key::BOTTOM);
        front.advance(&seen, key(0, 90, 9));
        assert_eq!(front.mark, Key::BOTTOM, "a reader of the queue before may not move the new one");
    }

    #[pg_test]
    fn a_front_not_yet_due_waits_for_its_time_before_the_next_look() {
        let mut front = slot();
        let seen = front.read(0);
        front.install(&seen, key(9, 5_000, 1), false, true, 1_000);
        let seen = front.read(1_000);
        assert!(!seen.look_due);
        assert!(front.read(5_000).look_due);
        assert!(!seen.full_look_due && front.read(1_000 + super::FULL_LOOK_EVERY + 1).full_look_due);
    }
}
