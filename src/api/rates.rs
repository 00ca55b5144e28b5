//! Rate limits (guide, "Flow control"): at most `rate_limit` claims of a queue's jobs in each
//! window of `rate_period`, and at most `key_rate_limit` of one concurrency key's in each window of
//! `key_rate_period`. Windows are aligned to the Unix epoch (for a second: each second of the
//! database clock), and the clock of each claim decides its window.
//!
//! A rate is counted in `jq_rate_counts` by the claims it admits, each in the window of its own
//! clock (a claim whose clock is older than a window already counted takes nothing), under a lock
//! that makes the count exact: the queue's rate lock (taken here without waiting: a claim that finds another
//! claimer counting takes nothing, and is woken when that one commits), or the key's lock, which
//! the key rotation holds anyway (`keys`). The count is read after the lock is taken, in a snapshot
//! that shows every count committed before, and written in the claim's transaction, which then
//! commits durably: a crash cannot lose a counted claim whose job a worker was handed.
//!
//! A claim applies the rates its session keeps with the queue's other settings (`settings`).

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;

use crate::db::Session;
use crate::shared::key_lock::KeyLock;
use crate::shared::{wake, xact};

const USED: &str = include_str!("../../sql/queries/rate_used.sql");
const COUNT: &str = include_str!("../../sql/queries/rate_count.sql");

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01), which timestamps count from.
const UNIX_TO_POSTGRES_MICROS: i64 = 946_684_800_000_000;

/// A rate: at most `limit` claims in each window of `period_micros`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Rate {
    pub limit: i32,
    pub period_micros: i64,
}

impl Rate {
    /// The start of the window `now` is in.
    pub fn window(self, now: pg_sys::TimestampTz) -> pg_sys::TimestampTz {
        now - (now + UNIX_TO_POSTGRES_MICROS).rem_euclid(self.period_micros)
    }
}

/// A queue's rates: its own, and each concurrency key's.
#[derive(Clone, Copy, Default)]
pub struct Rates {
    pub queue: Option<Rate>,
    pub key: Option<Rate>,
}

/// A claim admitted by the queue's rate: how many jobs it may take, in which window, under the
/// queue's rate lock (let go unless the claim takes a job).
pub struct Admitted {
    pub free: i32,
    window: pg_sys::TimestampTz,
    lock: KeyLock,
}

/// What the queue's rate lets a claim take now. None: nothing, because another claimer holds the
/// queue's rate lock (this claim is woken when that one commits) or the window is used up; then
/// `held_until` says when the next window opens, if that is what holds the claim back.
pub fn admit(
    db: &mut Session,
    queue_name: &str,
    rate: Rate,
    now: pg_sys::TimestampTz,
) -> spi::Result<Result<Admitted, Option<pg_sys::TimestampTz>>> {
    let Some(lock) = KeyLock::try_take(queue_name, "") else {
        return Ok(Err(None));
    };
    let window = rate.window(now);
    // A newer window counted (another claim read a later clock): this claim's window is over, and
    // its caller looks again with a fresh clock, at once.
    let used = match used(db, queue_name, "")? {
        Some((counted, _)) if counted > window => return Ok(Err(Some(now))),
        Some((counted, claims)) if counted == window => claims,
        _ => 0,
    };
    let free = rate.limit - used;
    if free <= 0 {
        return Ok(Err(Some(window + rate.period_micros)));
    }
    Ok(Ok(Admitted { free, window, lock }))
}

/// Counts the jobs an admitted claim took against the queue's rate, and keeps the rate lock to the
/// end of the transaction if it took any.
pub fn count_admitted(db: &mut Session, queue_name: &str, admitted: Admitted, claimed: usize) -> spi::Result<()> {
    if claimed == 0 {
        return Ok(());
    }
    count(db, queue_name, vec![String::new()], vec![claimed as i32], admitted.window)?;
    admitted.lock.keep();
    // Claimers that found the rate lock taken look again when this one commits.
    wake::at_commit(queue_name);
    Ok(())
}

/// The window a rate last counted claims in, and how many; None before its first claim.
fn used(db: &mut Session, queue_name: &str, key: &str) -> spi::Result<Option<(pg_sys::TimestampTz, i32)>> {
    let row = db.rows::<(TimestampWithTimeZone, i32)>(USED, &[queue_name.into(), key.into()])?;
    Ok(row.first().map(|&(counted, claims)| (counted.into(), claims)))
}

/// Counts claims against rates: `claims[i]` for the rate of `keys[i]` ('': the queue's), in
/// `window`. The transaction then commits durably.
pub fn count(
    db: &mut Session,
    queue_name: &str,
    keys: Vec<String>,
    claims: Vec<i32>,
    window: pg_sys::TimestampTz,
) -> spi::Result<()> {
    let window = TimestampWithTimeZone::try_from(window).expect("a window starts at a finite time");
    db.rows::<()>(COUNT, &[queue_name.into(), keys.into(), claims.into(), window.into()])?;
    xact::durable();
    Ok(())
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn windows_are_aligned_to_the_unix_epoch() {
        let second = Rate { limit: 1, period_micros: 1_000_000 };
        // 2000-01-01 00:00:00.5 UTC: in the second that starts on the hour.
        assert_eq!(second.window(500_000), 0);
        assert_eq!(second.window(-1), -1_000_000);
        let week = Rate { limit: 1, period_micros: 7 * 86_400_000_000 };
        // The Unix epoch was a Thursday; so is the start of every week window.
        let start = week.window(0);
        assert_eq!((start + UNIX_TO_POSTGRES_MICROS) % week.period_micros, 0);
        assert!(start <= 0 && 0 < start + week.period_micros);
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    /// The ids a query returns, in its order.
    fn ids(sql: &str) -> Vec<i64> {
        Spi::connect(|c| c.select(sql, None, &[]).unwrap().map(|r| r.get::<i64>(1).unwrap().unwrap()).collect())
    }

    // A window of 50 years (1970-2020, 2020-2070) does not end while a test runs.

    #[pg_test]
    fn a_queue_rate_admits_at_most_its_limit_in_a_window() {
        run("SELECT jq_configure('rq', '{\"rate_limit\": 3, \"rate_period\": \"50 years\"}')");
        run("SELECT jq_enqueue_batch('rq', array_fill('{}'::jsonb, ARRAY[5]))");
        one::<i64>("SELECT jq_enqueue('rq', '{}', concurrency_key => 'a')");
        assert_eq!(ids("SELECT id FROM jq_claim('rq', 'w', batch_size => 2)").len(), 2);
        assert_eq!(ids("SELECT id FROM jq_claim('rq', 'w', batch_size => 10)").len(), 1, "one left of three");
        assert_eq!(ids("SELECT id FROM jq_claim('rq', 'w', batch_size => 10)").len(), 0, "the keyed job too");
        assert_eq!(one::<i32>("SELECT claims FROM jq_rate_counts WHERE concurrency_key = ''"), 3);
        // Unlimited again, from the next claim on (a session forgets the settings it keeps when
        // they change).
        run("SELECT jq_configure('rq', '{\"rate_limit\": null, \"rate_period\": null}')");
        assert_eq!(ids("SELECT id FROM jq_claim('rq', 'w', batch_size => 10)").len(), 3);
    }

    #[pg_test]
    fn a_key_rate_admits_at_most_its_limit_per_key_in_a_window() {
        run("SELECT jq_configure('rk', '{\"key_rate_limit\": 2, \"key_rate_period\": \"50 years\"}')");
        run("SELECT jq_enqueue_batch('rk', array_fill('{}'::jsonb, ARRAY[5]), concurrency_key => 'a')");
        run("SELECT jq_enqueue_batch('rk', array_fill('{}'::jsonb, ARRAY[1]), concurrency_key => 'b')");
        let plain = enqueue("rk");
        let claimed = ids("SELECT id FROM jq_claim('rk', 'w', batch_size => 10)");
        assert_eq!(claimed.len(), 4, "two of a, one of b, the job without a key: {claimed:?}");
        assert!(claimed.contains(&plain));
        assert_eq!(ids("SELECT id FROM jq_claim('rk', 'w', batch_size => 10)"), Vec::<i64>::new());
        assert_eq!(
            one::<String>("SELECT string_agg(concurrency_key || '=' || claims, ',' ORDER BY 1) FROM jq_rate_counts"),
            "a=2,b=1"
        );
    }

    #[pg_test]
    fn a_prune_forgets_the_counts_of_windows_that_are_over() {
        run("SELECT jq_configure('rp', '{\"rate_limit\": 5, \"rate_period\": \"1 second\"}')");
        run("SELECT jq_configure('rp2', '{\"rate_limit\": 5, \"rate_period\": \"50 years\"}')");
        for queue in ["rp", "rp2"] {
            enqueue(queue);
            assert_eq!(ids(&format!("SELECT id FROM jq_claim('{queue}', 'w')")).len(), 1);
        }
        sleep(1.1);
        run("SELECT jq_prune()");
        assert_eq!(
            one::<String>(
                "SELECT string_agg(n.queue_name, ',') FROM jq_rate_counts JOIN jq_queue_ids n USING (queue_id)"
            ),
            "rp2",
            "the count of the window that is not over stays"
        );
    }

    /// The next window admits again: two per 2-second window, the first claims made early in a window.
    #[pg_test]
    fn a_rate_admits_again_when_its_next_window_opens() {
        run("SELECT jq_configure('rw', '{\"rate_limit\": 2, \"rate_period\": \"2 seconds\"}')");
        run("SELECT jq_enqueue_batch('rw', array_fill('{}'::jsonb, ARRAY[5]))");
        let into_window = one::<f64>("SELECT 2.05 - mod(extract(epoch FROM clock_timestamp()), 2)::float8");
        sleep(into_window);
        assert_eq!(ids("SELECT id FROM jq_claim('rw', 'w', batch_size => 10)").len(), 2);
        assert_eq!(ids("SELECT id FROM jq_claim('rw', 'w', batch_size => 10)").len(), 0, "the window is used up");
        // A waiting claim wakes when the next window opens, at most 2 s on.
        assert_eq!(ids("SELECT id FROM jq_claim('rw', 'w', batch_size => 10, wait => interval '5 s')").len(), 2);
    }
}
