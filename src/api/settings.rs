//! A queue's settings as a claim or an enqueue applies them, read once per session and kept until they change
//! (guide, "jq_configure"). A change of jq_queues, by jq_configure or by a direct UPDATE, fires
//! the table's statement trigger, which sends an invalidation of the table to every session at
//! commit (to this one at the end of the command); so does a change of jq_queue_ids: a queue's
//! first enqueue, which gives it its number, or one that sets its `ordering_keys` or its
//! `priorities` (`used`); and one of jq_key_settings (jq_configure_key), whose rows a keyed claim
//! looks up only in a queue that has some. Each session's callback then forgets every queue's settings, and the
//! next claim reads them again. Invalidations are taken in at the start of every transaction, and
//! every claim (each look of a waiting one) takes them in before it reads the settings
//! (`claim::prepare`), so a change applies from the next claim even within a transaction. A
//! transaction (or savepoint) that rolls back
//! has its invalidations replayed in its own session, so nothing read of its changes stays kept:
//! not a queue number given by a first enqueue that rolled back, which a later one would not get
//! again.
//!
//! A claim that began just as a change committed may still apply the settings before it, as it
//! would have had it begun a moment sooner; what the settings guard is checked again where it
//! must be exact: a concurrency limit under the queue's row lock (`claim::admit`), a rate under
//! the queue's rate lock (`rates`), and an ordering key by the statements themselves, which take
//! no job with an ordering key while the settings say the queue has none (`claim::take`). A
//! priority is a preference: a claim that has not yet heard of a queue's first job of another
//! priority takes the jobs of the priority it walks, as it would have a moment sooner.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use pgrx::datum::Interval;
use pgrx::prelude::*;
use pgrx::spi::{self, SpiHeapTupleData};

use crate::api::rates::{Rate, Rates};
use crate::db::{self, Column, FromRow};

const READ: &str = include_str!("../../sql/queries/queue_settings.sql");
const USED: &str = include_str!("../../sql/queries/queue_used.sql");
const NAME: &str = include_str!("../../sql/queries/queue_name.sql");
const ANY_KEEP_NOTHING: &str = include_str!("../../sql/queries/queue_any_keeps_nothing.sql");

/// What a claim applies of one queue.
#[derive(Clone, Copy)]
pub struct Settings {
    /// The queue's number; None before its first enqueue (then nothing is kept: the next claim
    /// reads again).
    pub queue_id: Option<i32>,
    /// Some job of the queue has had an ordering key (guide, "jq_enqueue": `ordering_key`); never cleared.
    pub ordering_keys: bool,
    /// Some job of the queue has had a priority other than 0; never cleared.
    pub priorities: bool,
    pub default_lease: Interval,
    pub max_runtime: Option<Interval>,
    pub paused: bool,
    pub concurrency_limit: Option<i32>,
    /// None: no job starves (guide, "Fairness").
    pub starvation_limit: Option<Interval>,
    pub starvation_limit_us: Option<i64>,
    pub rates: Rates,
    /// Whether committed enqueues send NOTIFY (guide, "Wake-ups"); None: while someone listens.
    pub notify: Option<bool>,
    /// The attempts of a job enqueued without its own `max_attempts`.
    pub max_attempts: i32,
    /// Whether a succeeded job stays in the history (guide, "Queues that keep nothing").
    pub keep_succeeded: bool,
    /// The limit of each concurrency key without one of its own (guide, "Flow control").
    pub key_concurrency_limit: Option<i32>,
    /// Whether some key of the queue has a row in jq_key_settings (its own limit or weight): only
    /// then does a keyed claim look them up.
    pub key_settings: bool,
}

/// One row of `queue_settings.sql`: the settings, and the oids of the tables they are read from.
struct Read {
    settings: Settings,
    tables: [pg_sys::Oid; 3],
}

impl FromRow for Read {
    fn from_row(row: &SpiHeapTupleData) -> spi::Result<Self> {
        let rate = |limit: Option<i32>, period: Option<i64>| match (limit, period) {
            (Some(limit), Some(period_micros)) if period_micros > 0 => Some(Rate { limit, period_micros }),
            _ => None,
        };
        let settings = Settings {
            queue_id: Column::column(row, 1)?,
            ordering_keys: Column::column(row, 2)?,
            priorities: Column::column(row, 3)?,
            default_lease: Column::column(row, 4)?,
            max_runtime: Column::column(row, 5)?,
            paused: Column::column(row, 6)?,
            concurrency_limit: Column::column(row, 7)?,
            starvation_limit: Column::column(row, 8)?,
            starvation_limit_us: Column::column(row, 9)?,
            rates: Rates {
                queue: rate(Column::column(row, 10)?, Column::column(row, 11)?),
                key: rate(Column::column(row, 12)?, Column::column(row, 13)?),
            },
            notify: Column::column(row, 14)?,
            max_attempts: Column::column(row, 15)?,
            keep_succeeded: Column::column(row, 16)?,
            key_concurrency_limit: Column::column(row, 17)?,
            key_settings: Column::column(row, 18)?,
        };
        let tables = [Column::column(row, 19)?, Column::column(row, 20)?, Column::column(row, 21)?];
        Ok(Read { settings, tables })
    }
}

thread_local! {
    /// A backend is one thread.
    static KEPT: RefCell<HashMap<String, Settings>> = RefCell::new(HashMap::new());
    /// Queue names by number; a number never names another queue.
    static NAMES: RefCell<HashMap<i32, String>> = RefCell::new(HashMap::new());
    /// Whether some queue keeps no succeeded job; None until read.
    static ANY_KEEPS_NOTHING: Cell<Option<bool>> = const { Cell::new(None) };
    /// The oids of jq_queues and jq_queue_ids; None until read (then every invalidation forgets).
    static TABLES: Cell<Option<[pg_sys::Oid; 3]>> = const { Cell::new(None) };
    static CALLBACK_REGISTERED: Cell<bool> = const { Cell::new(false) };
}

/// The settings of `queue_name`, as kept by this session or read now.
pub fn of(queue_name: &str) -> spi::Result<Settings> {
    if let Some(kept) = KEPT.with(|kept| kept.borrow().get(queue_name).copied()) {
        return Ok(kept);
    }
    register_callback();
    let read = db::connect(|db| db.rows::<Read>(READ, &[queue_name.into()]))?
        .into_iter()
        .next()
        .expect("queue_settings.sql returns one row");
    TABLES.set(Some(read.tables));
    if read.settings.queue_id.is_some() {
        KEPT.with(|kept| kept.borrow_mut().insert(queue_name.to_owned(), read.settings));
    }
    Ok(read.settings)
}

/// The name of the queue numbered `queue_id`.
pub fn queue_name(queue_id: i32) -> spi::Result<String> {
    if let Some(name) = NAMES.with(|names| names.borrow().get(&queue_id).cloned()) {
        return Ok(name);
    }
    register_callback();
    let name = db::connect(|db| db.first::<String>(NAME, &[queue_id.into()]))?
        .unwrap_or_else(|| panic!("queue number {queue_id} has no name in jq_queue_ids"));
    NAMES.with(|names| names.borrow_mut().insert(queue_id, name.clone()));
    Ok(name)
}

/// Whether some queue keeps no succeeded job (guide, "Queues that keep nothing"): only then need
/// a completion look at its queue's setting, and delete the job's events.
pub fn any_keeps_nothing() -> spi::Result<bool> {
    if let Some(known) = ANY_KEEPS_NOTHING.get() {
        return Ok(known);
    }
    register_callback();
    let any = db::connect(|db| db.first::<bool>(ANY_KEEP_NOTHING, &[]))?.unwrap_or(true);
    ANY_KEEPS_NOTHING.set(Some(any));
    Ok(any)
}

/// An enqueue of a job with an ordering key, or of a priority other than 0: unless the queue's
/// settings already say it has had one, mark it in jq_queue_ids, whose trigger then tells every
/// session (at commit) to read the settings again, so that their claims check ordering keys, or
/// walk every priority (`claim::take`), from then on. Marked in the enqueue's own transaction:
/// the job and the mark commit together.
pub fn used(db: &mut db::Session, queue_name: &str, ordering_key: bool, priority: i32) -> spi::Result<()> {
    let other_priority = priority != 0;
    if !ordering_key && !other_priority {
        return Ok(());
    }
    let kept = of(queue_name)?;
    if (!ordering_key || kept.ordering_keys) && (!other_priority || kept.priorities) {
        return Ok(());
    }
    db.rows::<()>(USED, &[queue_name.into(), ordering_key.into(), other_priority.into()]).map(drop)
}

fn register_callback() {
    if CALLBACK_REGISTERED.get() {
        return;
    }
    // SAFETY: registers a callback for the life of the backend, once; it takes no argument.
    unsafe { pg_sys::CacheRegisterRelcacheCallback(Some(relation_changed), pg_sys::Datum::from(0)) };
    CALLBACK_REGISTERED.set(true);
}

/// jq_queues, jq_queue_ids or jq_key_settings changed (their statement triggers send an
/// invalidation of them), or was dropped with the extension, or every relation was invalidated at
/// once.
#[pg_guard]
unsafe extern "C-unwind" fn relation_changed(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    let ours = TABLES.get().is_none_or(|tables| tables.contains(&relid));
    if relid == pg_sys::InvalidOid || ours {
        KEPT.with(|kept| kept.borrow_mut().clear());
        NAMES.with(|names| names.borrow_mut().clear());
        ANY_KEEPS_NOTHING.set(None);
        TABLES.set(None);
    }
}

/// The statement trigger of every table whose contents sessions keep (jq_queues, jq_queue_ids and
/// jq_key_settings: the settings here; jq_grants: the rights' answers, `crate::rights`): tell every session (this
/// one included, at the end of the command) to forget what it keeps of the trigger's table once
/// this transaction commits.
#[pg_trigger]
fn jq_table_changed<'a>(
    trigger: &'a pgrx::PgTrigger<'a>,
) -> Result<Option<PgHeapTuple<'a, pgrx::AllocatedByPostgres>>, pgrx::PgTriggerError> {
    // SAFETY: queues an invalidation of the trigger's own table, sent at commit.
    unsafe { pg_sys::CacheInvalidateRelcacheByRelid(trigger.relation()?.oid()) };
    Ok(None)
}
