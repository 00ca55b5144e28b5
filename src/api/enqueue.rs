//! jq_enqueue and jq_enqueue_batch: new pending jobs.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;

use super::{dependencies, keys, settings};
use crate::db::{self, clock, payload::Payload};
use crate::input;
use crate::rights::{self, Privilege};
use crate::shared::front::{self, Key};
use crate::shared::wake;

const INSERT: &str = include_str!("../../sql/queries/enqueue.sql");
const INSERT_UNLESS_KEY_HELD: &str = include_str!("../../sql/queries/enqueue_dedup.sql");
pub(crate) const LIVE_HOLDER_OF_KEY: &str = include_str!("../../sql/queries/enqueue_existing.sql");
const INSERT_BATCH: &str = include_str!("../../sql/queries/enqueue_batch.sql");
const REGISTER: &str = include_str!("../../sql/queries/queue_register.sql");

/// Enqueues one job and returns its id. With a dedup key held by a live (pending or running) job of
/// the queue, returns that job's id and inserts nothing. A job not claimed before `expires_at` ends
/// cancelled, EXPIRED (guide, "Snooze and deadlines").
// Its C symbol is new in 0.4.0, whose `depends_on` 0.3.0's definition lacks: `upgrade` keeps the
// older ones.
#[pg_extern(name = "jq_enqueue", volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
#[allow(clippy::too_many_arguments)]
fn jq_enqueue_one(
    queue_name: Option<&str>,
    payload: Option<Payload>,
    priority: default!(Option<i32>, 0),
    run_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    max_attempts: default!(Option<i32>, "NULL"),
    dedup_key: default!(Option<&str>, "NULL"),
    ordering_key: default!(Option<&str>, "NULL"),
    concurrency_key: default!(Option<&str>, "NULL"),
    expires_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    depends_on: default!(Option<Vec<Option<i64>>>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> spi::Result<i64> {
    input::one_dimension(fcinfo, 9, "depends_on");
    let queue_name = input::queue_name(queue_name);
    let payload = input::payload("payload", payload);
    let priority = input::priority(priority);
    let run_at = input::run_at(run_at);
    let expires_at = input::expires_at(expires_at, run_at);
    let max_attempts = input::max_attempts(max_attempts);
    let dedup_key = input::key("dedup_key", dedup_key);
    let ordering_key = input::key("ordering_key", ordering_key);
    let concurrency_key = input::concurrency_key(concurrency_key);
    let depends_on = input::depends_on(depends_on);
    rights::require(queue_name, Privilege::Enqueue);
    if let Some(depends_on) = &depends_on {
        dependencies::check(depends_on);
    }
    let job = NewJob {
        queue_name,
        payload,
        priority,
        run_at,
        max_attempts,
        dedup_key,
        ordering_key,
        concurrency_key,
        expires_at,
        depends_on,
    };
    let now = clock::now();
    rights::as_owner(|| db::connect(|db| insert(db, &job, now)))
}

/// One job, its options checked as jq_enqueue checks them.
pub(crate) struct NewJob<'a> {
    pub queue_name: &'a str,
    pub payload: Payload,
    pub priority: i32,
    pub run_at: Option<TimestampWithTimeZone>,
    pub max_attempts: Option<i32>,
    pub dedup_key: Option<&'a str>,
    pub ordering_key: Option<&'a str>,
    pub concurrency_key: Option<&'a str>,
    pub expires_at: Option<TimestampWithTimeZone>,
    /// The jobs it waits for (guide, "Workflows"), checked by `dependencies::check`.
    pub depends_on: Option<Vec<i64>>,
}

/// Inserts the job (or finds the live job that holds its dedup key) and returns its id: jq_enqueue's
/// body, which schedules' ticks share (src/api/schedules.rs). Runs with the owner's rights.
pub(crate) fn insert(db: &mut db::Session, job: &NewJob, now: TimestampWithTimeZone) -> spi::Result<i64> {
    let (queue_id, queue) = registered(db, job.queue_name)?;
    let insert = if job.dedup_key.is_some() { INSERT_UNLESS_KEY_HELD } else { INSERT };
    let waits = match &job.depends_on {
        Some(depends_on) => Some(dependencies::waits(db, depends_on)?),
        None => None,
    };
    loop {
        let inserted = db.first::<i64>(
            insert,
            &[
                queue_id.into(),
                job.payload.into(),
                job.priority.into(),
                job.run_at.into(),
                job.max_attempts.unwrap_or(queue.max_attempts).into(),
                job.dedup_key.into(),
                job.ordering_key.into(),
                now.into(),
                job.concurrency_key.into(),
                job.expires_at.into(),
                job.depends_on.clone().into(),
                waits.as_ref().map_or(0, |w| w.awaiting).into(),
            ],
        )?;
        if let Some(id) = inserted {
            settings::used(db, job.queue_name, job.ordering_key.is_some(), job.priority)?;
            if let (Some(depends_on), Some(waits)) = (&job.depends_on, &waits) {
                dependencies::link(db, &[id], depends_on, waits, now)?;
                if waits.awaiting > 0 || waits.failed.is_some() {
                    // Held, or cancelled: claimable only once released (src/api/dependencies.rs).
                    return Ok(id);
                }
            }
            wake::after_enqueue(job.queue_name, queue.notify);
            after_insert(
                job.queue_name,
                Key { priority: job.priority, available_at: job.run_at.unwrap_or(now).into(), id },
                job.ordering_key.is_some(),
                job.concurrency_key.is_some(),
            );
            return Ok(id);
        }
        // A live job holds the key. It may finish between the two statements; then the key is free
        // and the insert is tried again. Run read-write (as `Session::first` does), so that the lookup
        // takes a fresh snapshot: a read-only one would reuse the calling statement's, which may
        // predate the holder, and the loop would never end.
        let key = job.dedup_key.expect("only a held dedup key leaves the insert without a row");
        if let Some(id) = db.first::<i64>(LIVE_HOLDER_OF_KEY, &[job.queue_name.into(), key.into()])? {
            return Ok(id);
        }
    }
}

/// Enqueues many jobs in one statement; returns their ids in input order.
// A new C symbol, as for jq_enqueue.
#[pg_extern(name = "jq_enqueue_batch", volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
#[allow(clippy::too_many_arguments)]
fn jq_enqueue_many(
    queue_name: Option<&str>,
    payloads: Option<Vec<Option<Payload>>>,
    priority: default!(Option<i32>, 0),
    run_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    max_attempts: default!(Option<i32>, "NULL"),
    concurrency_key: default!(Option<&str>, "NULL"),
    expires_at: default!(Option<TimestampWithTimeZone>, "NULL"),
    depends_on: default!(Option<Vec<Option<i64>>>, "NULL"),
    fcinfo: pg_sys::FunctionCallInfo,
) -> spi::Result<SetOfIterator<'static, i64>> {
    input::one_dimension(fcinfo, 1, "payloads");
    input::one_dimension(fcinfo, 7, "depends_on");
    let queue_name = input::queue_name(queue_name);
    let payloads = input::payloads(payloads);
    let priority = input::priority(priority);
    let run_at = input::run_at(run_at);
    let expires_at = input::expires_at(expires_at, run_at);
    let max_attempts = input::max_attempts(max_attempts);
    let concurrency_key = input::concurrency_key(concurrency_key);
    let depends_on = input::depends_on(depends_on);
    rights::require(queue_name, Privilege::Enqueue);
    if let Some(depends_on) = &depends_on {
        dependencies::check(depends_on);
    }
    let now = clock::now();

    let any = !payloads.is_empty();
    let ids = rights::as_owner(|| {
        db::connect(|db| {
            if !any {
                return Ok(Vec::new());
            }
            let (queue_id, queue) = registered(db, queue_name)?;
            let waits = match &depends_on {
                Some(depends_on) => Some(dependencies::waits(db, depends_on)?),
                None => None,
            };
            let args = [
                queue_id.into(),
                payloads.into(),
                priority.into(),
                run_at.into(),
                max_attempts.unwrap_or(queue.max_attempts).into(),
                now.into(),
                concurrency_key.into(),
                expires_at.into(),
                depends_on.clone().into(),
                waits.as_ref().map_or(0, |w| w.awaiting).into(),
            ];
            let ids: Vec<(i64,)> = db.rows(INSERT_BATCH, &args)?;
            settings::used(db, queue_name, false, priority)?;
            if let (Some(depends_on), Some(waits)) = (&depends_on, &waits) {
                let new: Vec<i64> = ids.iter().map(|(id,)| *id).collect();
                dependencies::link(db, &new, depends_on, waits, now)?;
                if waits.awaiting > 0 || waits.failed.is_some() {
                    return Ok(ids);
                }
            }
            if let Some(&(first,)) = ids.iter().min() {
                wake::after_enqueue(queue_name, queue.notify);
                let first = Key { priority, available_at: run_at.unwrap_or(now).into(), id: first };
                after_insert(queue_name, first, false, concurrency_key.is_some());
            }
            Ok(ids)
        })
    })?;
    Ok(SetOfIterator::new(ids.into_iter().map(|(id,)| id)))
}

/// What an enqueue tells the claims of this session and the others: a job without a concurrency
/// key lowers the claim front (guide, "Old snapshots") at commit; one with a key is for the key
/// rotation, which this session then looks at on its next claim.
fn after_insert(queue_name: &str, first: Key, ordered: bool, keyed: bool) {
    if keyed {
        keys::enqueued_keyed(queue_name);
    } else {
        front::lower_at_commit(queue_name, first, ordered);
    }
}

/// The queue's number and settings, as the session keeps them; on the queue's first enqueue, its
/// number is given first (in jq_queue_ids: a no-op if another session gave it meanwhile).
fn registered(db: &mut db::Session, queue_name: &str) -> spi::Result<(i32, settings::Settings)> {
    let mut queue = settings::of(queue_name)?;
    if queue.queue_id.is_none() {
        db.rows::<()>(REGISTER, &[queue_name.into()])?;
        queue = settings::of(queue_name)?;
    }
    let queue_id =
        queue.queue_id.unwrap_or_else(|| panic!("queue \"{queue_name}\" has no number after its registration"));
    Ok((queue_id, queue))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn enqueue_stores_a_pending_job_with_defaults() {
        let id = enqueue("emails");
        assert!(one::<bool>(&format!(
            "SELECT status = 'pending' AND priority = 0 AND attempt_count = 0 AND max_attempts = 8
                AND lease_token = 0 AND lease_owner IS NULL AND lease_expires_at IS NULL
                AND available_at = created_at AND finished_at IS NULL AND payload = '{{\"k\": 1}}'
             FROM jq_jobs WHERE id = {id}"
        )));
    }

    #[pg_test]
    fn enqueue_takes_max_attempts_from_the_queue_unless_given() {
        run("INSERT INTO jq_queues (queue_name, max_attempts) VALUES ('q3', 3)");
        let from_queue = one::<i64>("SELECT jq_enqueue('q3', '{}')");
        let explicit = one::<i64>("SELECT jq_enqueue('q3', '{}', max_attempts => 5)");
        let other_queue = one::<i64>("SELECT jq_enqueue('other', '{}')");
        let max = |id: i64| one::<i32>(&format!("SELECT max_attempts FROM jq_jobs WHERE id = {id}"));
        assert_eq!((max(from_queue), max(explicit), max(other_queue)), (3, 5, 8));
    }

    #[pg_test]
    fn ids_are_never_reused_and_ascend() {
        let a = enqueue("q");
        let b = enqueue("q");
        run(&format!("DELETE FROM jq_live_jobs WHERE id = {b}"));
        let c = enqueue("q");
        assert!(a < b && b < c);
    }

    #[pg_test]
    fn run_at_delays_a_job() {
        run("SELECT jq_enqueue('q', '{}', run_at => clock_timestamp() + interval '1 hour')");
        assert_eq!(claim("q", "w", "30 s"), None);
        let past = one::<i64>("SELECT jq_enqueue('q', '{}', run_at => clock_timestamp() - interval '1 minute')");
        assert_eq!(claim("q", "w", "30 s").map(|c| c.0), Some(past));
        assert_eq!(one::<i64>("SELECT scheduled FROM jq_queue_stats WHERE queue_name = 'q'"), 1);
    }

    #[pg_test]
    fn enqueue_batch_returns_ids_in_input_order() {
        let ids: Vec<i64> = Spi::connect(|c| {
            c.select(
                "SELECT * FROM jq_enqueue_batch('b', ARRAY['{\"n\":1}', '{\"n\":2}', '{\"n\":3}']::jsonb[], 7)",
                None,
                &[],
            )
            .unwrap()
            .map(|r| r.get::<i64>(1).unwrap().unwrap())
            .collect()
        });
        assert_eq!(ids.len(), 3);
        for (i, id) in ids.iter().enumerate() {
            let n = one::<i32>(&format!("SELECT (payload->>'n')::int FROM jq_jobs WHERE id = {id} AND priority = 7"));
            assert_eq!(n as usize, i + 1);
        }
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_enqueue_batch('b', ARRAY[]::jsonb[])"), 0);
    }

    #[pg_test]
    fn dedup_key_returns_the_live_job_until_it_finishes() {
        let first = one::<i64>("SELECT jq_enqueue('q', '{}', dedup_key => 'user-7')");
        assert_eq!(one::<i64>("SELECT jq_enqueue('q', '{\"other\": 1}', dedup_key => 'user-7')"), first);
        assert_ne!(one::<i64>("SELECT jq_enqueue('other', '{}', dedup_key => 'user-7')"), first);
        assert_eq!(one::<i64>("SELECT count(*) FROM jq_jobs WHERE queue_name = 'q'"), 1);
        let (_, token) = claim("q", "w", "30 s").unwrap();
        assert_eq!(
            one::<i64>("SELECT jq_enqueue('q', '{}', dedup_key => 'user-7')"),
            first,
            "running still holds the key"
        );
        assert!(complete(first, "w", token));
        assert_ne!(one::<i64>("SELECT jq_enqueue('q', '{}', dedup_key => 'user-7')"), first);
    }
}
