//! The key rotation (guide, "Flow control"): jobs with a concurrency key are claimed key by key in
//! turn, a key's running jobs within the queue's `key_concurrency_limit`.
//!
//! Each session keeps its own place in each queue's rotation: the keys with pending jobs, in key
//! order, and after the last of them one turn for the queue's jobs without a key. A claim takes
//! the next keys, takes each one's key lock without waiting (a key locked by another claimer is
//! passed over: that claimer serves it), and then claims within the locked keys in one statement
//! (`claim_keyed.sql`) whose snapshot is taken after the locks, so it counts every claim of those
//! keys that committed before. The lock of a key that got a job is held until the transaction
//! ends, which is what makes the limit exact: no two claims of one key overlap, and each counts
//! the other's jobs. The lock of a key that got none is let go at once.
//!
//! The key locks are advisory locks of their own kind (`pg_locks`: locktype `advisory`, objsubid
//! 27249), in memory: nothing is written for them, and no SQL function can take them. They live in
//! PostgreSQL's lock table, which every database of the server shares, so one transaction keeps at
//! most `max_locks_per_transaction` of them: a transaction that already holds that many passes
//! further keys over, as if another claimer held them, until it ends (guide, "Flow control").

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use pgrx::datum::DatumWithOid;
use pgrx::prelude::*;
use pgrx::spi;

use super::rates;
use super::settings::Settings;
use crate::db::Session;
use crate::error;
use crate::shared::key_lock::KeyLock;

pub(crate) const KEYS: &str = include_str!("../../sql/queries/claim_keys.sql");
const KEY_LIMIT: &str = include_str!("../../sql/queries/claim_key_limit.sql");

/// How many keys one look of the rotation reads ahead.
const LOOKAHEAD: i32 = 32;
/// At most this many keys are visited by one claim, so that a claim of a queue whose keys are all
/// at their limits ends; the next claim goes on where this one stopped.
const MOST_KEYS_PER_CLAIM: usize = 64;
/// A session that found no key with pending jobs looks again after this, or after it enqueued a
/// keyed job itself, whichever is first.
const NO_KEYS_RECHECK: Duration = Duration::from_secs(1);

/// One session's place in one queue's rotation.
#[derive(Default)]
struct Rotation {
    /// The keys to visit next, in key order, read ahead, each with what is left of its turn (its
    /// weight in jq_key_settings, less what it took when a claim's batch ended inside its turn)
    /// and whether its pending jobs had more than one priority when read.
    upcoming: VecDeque<(String, i32, bool)>,
    /// The last key visited or read ahead ("": none yet, the rotation starts at the first key).
    after: String,
    /// Whether the last look reached the last key: once `upcoming` is empty, the round is over.
    at_end: bool,
    /// The jobs without a key take the next turn.
    unkeyed_next: bool,
    /// Set when a look found no key with pending jobs at all: until then, claims skip the rotation.
    no_keys_until: Option<Instant>,
}

thread_local! {
    /// A backend is one thread.
    static ROTATIONS: RefCell<HashMap<String, Rotation>> = RefCell::new(HashMap::new());
}

fn with_rotation<R>(queue_name: &str, f: impl FnOnce(&mut Rotation) -> R) -> R {
    ROTATIONS.with(|all| {
        let mut all = all.borrow_mut();
        if !all.contains_key(queue_name) {
            all.insert(queue_name.to_owned(), Rotation::default());
        }
        f(all.get_mut(queue_name).expect("inserted above"))
    })
}

/// Whether a claim of the queue looks at its keys before its jobs without a key.
pub fn keys_first(queue_name: &str) -> bool {
    with_rotation(queue_name, |r| !r.unkeyed_next && may_have_keys(r))
}

/// Whether a claim of the queue should look at its keys at all.
pub fn may_look(queue_name: &str) -> bool {
    with_rotation(queue_name, |r| may_have_keys(r))
}

fn may_have_keys(rotation: &Rotation) -> bool {
    rotation.no_keys_until.is_none_or(|until| Instant::now() >= until)
}

/// The jobs without a key had their turn.
pub fn unkeyed_served(queue_name: &str) {
    with_rotation(queue_name, |r| r.unkeyed_next = false);
}

/// This session enqueued a job with a concurrency key into the queue: its next claim looks at keys.
pub fn enqueued_keyed(queue_name: &str) {
    with_rotation(queue_name, |r| r.no_keys_until = None);
}

/// Claims up to `want` jobs with a concurrency key, key by key from where this session's rotation
/// stands: one of `statements` (the second when a key's pending jobs have more than one priority,
/// so that its starving jobs are looked for; the queue's `priorities` setting: it has had jobs of
/// more than one, else no key has) with `args()` ($1 to $12 of claim.sql) and, as $13 to $17, the
/// keys locked, each one's share, the queue's key rate with its window at `now`, and its
/// key_concurrency_limit. Counts what each key took against its rate. Returns the claimed rows,
/// and when a key rate held back may let more be claimed (the next window), if it held any back.
#[allow(clippy::too_many_arguments)]
pub fn claim<T>(
    db: &mut Session,
    statements: (&'static str, &'static str),
    args: impl Fn() -> [DatumWithOid<'static>; 12],
    queue_name: &str,
    settings: &Settings,
    want: i32,
    now: pg_sys::TimestampTz,
    keyed_job: impl Fn(&T) -> Option<&str>,
) -> spi::Result<(Vec<T>, Option<pg_sys::TimestampTz>)>
where
    T: crate::db::FromRow,
{
    let key_rate = settings.rates.key;
    let window = key_rate.map(|rate| rate.window(now));
    let window_arg = window.and_then(|w| pgrx::datum::TimestampWithTimeZone::try_from(w).ok());
    let mut claimed: Vec<T> = Vec::new();
    let mut visited = 0;
    while (claimed.len() as i32) < want && visited < MOST_KEYS_PER_CLAIM {
        let left = want - claimed.len() as i32;
        let Some(first) = next_key(db, queue_name, settings)? else {
            break;
        };
        visited += 1;
        // The keys whose turns cover what is left of the batch, each locked (or passed over).
        let mut locked: Vec<(String, i32, bool, KeyLock)> = Vec::new();
        let take = |(key, turn, mixed): (String, i32, bool), locked: &mut Vec<(String, i32, bool, KeyLock)>| {
            if let Some(lock) = KeyLock::try_take(queue_name, &key) {
                locked.push((key, turn, mixed, lock));
            }
        };
        take(first, &mut locked);
        while locked.iter().map(|(_, turn, ..)| turn).sum::<i32>() < left && visited < MOST_KEYS_PER_CLAIM {
            let Some(next) = with_rotation(queue_name, |r| r.upcoming.pop_front()) else {
                break;
            };
            visited += 1;
            take(next, &mut locked);
        }
        if locked.is_empty() {
            continue;
        }
        refuse_a_stale_count(db, queue_name)?;
        let keys: Vec<String> = locked.iter().map(|(key, ..)| key.clone()).collect();
        let round_over = with_rotation(queue_name, |r| r.upcoming.is_empty() && r.at_end);
        let shares = shares(&locked.iter().map(|(_, turn, ..)| *turn).collect::<Vec<_>>(), left, round_over);
        let statement = if locked.iter().any(|(_, _, mixed, _)| *mixed) { statements.1 } else { statements.0 };
        let mut all = Vec::from(args());
        all.push(keys.into());
        all.push(shares.clone().into());
        all.push(key_rate.map(|rate| rate.limit).into());
        all.push(window_arg.into());
        all.push(settings.key_concurrency_limit.into());
        let rows: Vec<T> = db.rows(statement, &all)?;
        let mut counted = (Vec::new(), Vec::new());
        let mut turn_goes_on = Vec::new();
        for ((key, turn, mixed, lock), share) in locked.into_iter().zip(&shares) {
            let took = rows.iter().filter(|row| keyed_job(row) == Some(key.as_str())).count() as i32;
            // A key that took all its share with some of its turn left goes on at the next claim.
            if took == *share && took < turn {
                turn_goes_on.push((key.clone(), turn - took, mixed));
            }
            // A key that got a job keeps its lock until the transaction ends.
            if took > 0 {
                lock.keep();
                counted.0.push(key);
                counted.1.push(took);
            }
        }
        with_rotation(queue_name, |r| turn_goes_on.into_iter().rev().for_each(|key| r.upcoming.push_front(key)));
        if let (Some(window), false) = (window, counted.0.is_empty()) {
            rates::count(db, queue_name, counted.0, counted.1, window)?;
        }
        claimed.extend(rows);
    }
    // A key its rate held back may have jobs again in the next window: a waiting claim looks then.
    let again_at = match (key_rate, window, (claimed.len() as i32) < want) {
        (Some(rate), Some(window), true) => Some(window + rate.period_micros),
        _ => None,
    };
    Ok((claimed, again_at))
}

/// The next key of the rotation with its turn, reading ahead when none is left; None at the end of
/// a round, when the jobs without a key take their turn and the next round starts at the first key.
fn next_key(db: &mut Session, queue_name: &str, settings: &Settings) -> spi::Result<Option<(String, i32, bool)>> {
    if let Some(key) = with_rotation(queue_name, |r| r.upcoming.pop_front()) {
        return Ok(Some(key));
    }
    let (after, at_end) = with_rotation(queue_name, |r| (r.after.clone(), r.at_end));
    if !at_end {
        let keys: Vec<(String, i32, bool)> = db.rows(
            KEYS,
            &[
                queue_name.into(),
                after.as_str().into(),
                LOOKAHEAD.into(),
                settings.priorities.into(),
                settings.key_settings.into(),
            ],
        )?;
        let found = keys.len();
        let key = with_rotation(queue_name, |r| {
            r.upcoming.extend(keys);
            r.after = r.upcoming.back().map(|(key, ..)| key.clone()).unwrap_or_default();
            r.at_end = found < LOOKAHEAD as usize;
            if found == 0 && after.is_empty() {
                r.no_keys_until = Some(Instant::now() + NO_KEYS_RECHECK);
            }
            r.upcoming.pop_front()
        });
        if key.is_some() {
            return Ok(key);
        }
    }
    with_rotation(queue_name, |r| {
        r.after.clear();
        r.at_end = false;
        r.unkeyed_next = true;
    });
    Ok(None)
}

/// What each locked key may take of the `left` jobs a batch still wants: its turn, the last ones'
/// cut so that they add up to no more than `left`. At the end of a round (`round_over`: no other
/// key waits), what their turns leave of the batch is shared out over them as well, evenly, the
/// first taking one more.
fn shares(turns: &[i32], left: i32, round_over: bool) -> Vec<i32> {
    let mut rest = left;
    let mut shares: Vec<i32> = turns
        .iter()
        .map(|turn| {
            let share = (*turn).min(rest);
            rest -= share;
            share
        })
        .collect();
    if round_over && rest > 0 {
        let keys = shares.len() as i32;
        for (i, share) in shares.iter_mut().enumerate() {
            *share += rest / keys + i32::from((i as i32) < rest % keys);
        }
    }
    shares
}

/// A key limit (or a key rate) counts running jobs (claims) in the claim's snapshot, which must be
/// newer than the key lock. In REPEATABLE READ and SERIALIZABLE it is the transaction's first,
/// which may miss claims committed since, so a claim there of a queue with a key limit or a key
/// rate is refused rather than let run one job too many.
fn refuse_a_stale_count(db: &mut Session, queue_name: &str) -> spi::Result<()> {
    if !crate::db::read_committed() && db.first::<bool>(KEY_LIMIT, &[queue_name.into()])?.is_some() {
        error::flow_limit_needs_read_committed(queue_name, "key_concurrency_limit or key_rate_limit");
    }
    Ok(())
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn shares_are_the_keys_turns_within_the_batch() {
        assert_eq!(shares(&[1], 1, false), vec![1]);
        assert_eq!(shares(&[1, 3, 1], 3, false), vec![1, 2, 0], "the batch ends inside the second turn");
        assert_eq!(shares(&[1, 2], 10, false), vec![1, 2], "other keys wait: no more than the turns");
        assert_eq!(shares(&[1, 2], 10, true), vec![5, 5], "no other key waits: the rest is shared out");
        assert_eq!(shares(&[1, 1, 1], 10, true), vec![4, 3, 3]);
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

    fn keyed(queue: &str, key: &str, n: i32) -> Vec<i64> {
        ids(&format!(
            "SELECT * FROM jq_enqueue_batch('{queue}', array_fill('{{}}'::jsonb, ARRAY[{n}]), concurrency_key => '{key}')"
        ))
    }

    /// The key locks this transaction holds.
    fn key_locks() -> i64 {
        one::<i64>(
            "SELECT count(*) FROM pg_locks
             WHERE locktype = 'advisory' AND objsubid = 27249 AND pid = pg_backend_pid() AND granted",
        )
    }

    /// The key locks share PostgreSQL's lock table with every database: one transaction claiming
    /// job after job of distinct keys keeps no more of them than max_locks_per_transaction (64
    /// here), and passes further keys over until it ends.
    #[pg_test]
    fn one_transaction_keeps_at_most_max_locks_per_transaction_key_locks() {
        for key in 0..100 {
            keyed("many", &format!("k{key}"), 1);
        }
        let most = one::<i64>("SELECT current_setting('max_locks_per_transaction')::bigint");
        let mut claimed = 0;
        for _ in 0..100 {
            claimed += ids("SELECT id FROM jq_claim('many', 'w')").len() as i64;
        }
        assert_eq!(key_locks(), most);
        assert_eq!(claimed, most, "a key whose lock it could not keep was claimed");
    }

    #[pg_test]
    fn a_key_never_runs_more_jobs_than_the_key_limit() {
        run("SELECT jq_configure('kl', '{\"key_concurrency_limit\": 2}')");
        let a = keyed("kl", "a", 5);
        keyed("kl", "b", 1);
        let claimed = ids("SELECT id FROM jq_claim('kl', 'w', batch_size => 10) ORDER BY id");
        assert_eq!(claimed.len(), 3, "two of a and the one of b: {claimed:?}");
        assert_eq!(ids("SELECT id FROM jq_claim('kl', 'w', batch_size => 10)"), Vec::<i64>::new());
        let token = one::<i64>(&format!("SELECT lease_token FROM jq_jobs WHERE id = {}", a[0]));
        assert!(complete(a[0], "w", token));
        assert_eq!(
            ids("SELECT id FROM jq_claim('kl', 'w', batch_size => 10)"),
            vec![a[2]],
            "the freed slot, in id order"
        );
        // Raised, the limit lets more run; removed, none is kept back.
        run("SELECT jq_configure('kl', '{\"key_concurrency_limit\": 3}')");
        assert_eq!(ids("SELECT id FROM jq_claim('kl', 'w', batch_size => 10)"), vec![a[3]]);
        run("SELECT jq_configure('kl', '{\"key_concurrency_limit\": null}')");
        assert_eq!(ids("SELECT id FROM jq_claim('kl', 'w', batch_size => 10)"), vec![a[4]]);
    }

    /// A key limit counts the jobs whose lease is current: one whose lease expired (reaped or not)
    /// cannot complete, so its slot is free.
    #[pg_test]
    fn an_expired_lease_frees_its_key_slot() {
        run("SET LOCAL pg_jobqueue.inline_reap_max = 0");
        run("SELECT jq_configure('kx', '{\"key_concurrency_limit\": 1}')");
        let jobs = keyed("kx", "a", 2);
        assert_eq!(ids("SELECT id FROM jq_claim('kx', 'w', interval '1 second')"), vec![jobs[0]]);
        assert_eq!(ids("SELECT id FROM jq_claim('kx', 'w')"), Vec::<i64>::new());
        sleep(1.1);
        assert_eq!(ids("SELECT id FROM jq_claim('kx', 'w')"), vec![jobs[1]]);
    }

    /// Round robin: a key's backlog does not hold back another key's jobs, and the jobs without a
    /// key have a turn of their own each round (this session's first claim of the queue starts a
    /// round at the first key).
    #[pg_test]
    fn keys_are_claimed_in_turn_with_the_jobs_without_a_key() {
        let a = keyed("rr", "a", 10);
        let b = keyed("rr", "b", 2);
        let plain = enqueue("rr");
        let c = keyed("rr", "c", 1);
        let order: Vec<i64> = (0..8).flat_map(|_| ids("SELECT id FROM jq_claim('rr', 'w')")).collect();
        assert_eq!(order, vec![a[0], b[0], c[0], plain, a[1], b[1], a[2], a[3]]);
    }

    /// The lock of a key that got a job is held to the end of the transaction (which makes the limit
    /// exact); that of a key that got none is let go, so that it holds back no other claimer.
    #[pg_test]
    fn only_the_keys_that_got_a_job_stay_locked() {
        run("SELECT jq_configure('kk', '{\"key_concurrency_limit\": 1}')");
        keyed("kk", "a", 2);
        assert_eq!(ids("SELECT id FROM jq_claim('kk', 'w')").len(), 1);
        assert_eq!(key_locks(), 1);
        assert_eq!(ids("SELECT id FROM jq_claim('kk', 'w')").len(), 0, "a is at its limit");
        assert_eq!(key_locks(), 1, "the second claim's lock of a was let go");
        keyed("kk", "b", 1);
        run("SELECT jq_configure('kk', '{\"key_concurrency_limit\": null}')");
        assert_eq!(ids("SELECT id FROM jq_claim('kk', 'w', batch_size => 10)").len(), 2);
        assert_eq!(key_locks(), 2);
    }

    /// Weighted fair share: a key of weight w takes up to w jobs a turn, over claims as over a batch.
    #[pg_test]
    fn a_key_of_weight_w_takes_w_jobs_a_turn() {
        run("SELECT jq_configure_key('kw', 'a', '{\"weight\": 3}')");
        let a = keyed("kw", "a", 10);
        let b = keyed("kw", "b", 10);
        let order: Vec<i64> = (0..8).flat_map(|_| ids("SELECT id FROM jq_claim('kw', 'w')")).collect();
        let keys: String = order
            .iter()
            .map(|id| {
                if a.contains(id) {
                    'a'
                } else if b.contains(id) {
                    'b'
                } else {
                    '?'
                }
            })
            .collect();
        assert_eq!(keys, "aaabaaab");
        let batch = ids("SELECT id FROM jq_claim('kw', 'w', batch_size => 4)");
        assert_eq!(batch.iter().filter(|id| a.contains(id)).count(), 3, "a batch takes a's whole turn, then b's");
    }

    #[pg_test]
    fn a_keys_own_limit_replaces_the_queues() {
        run("SELECT jq_configure('ko2', '{\"key_concurrency_limit\": 1}')");
        run("SELECT jq_configure_key('ko2', 'a', '{\"concurrency_limit\": 3}')");
        let a = keyed("ko2", "a", 5);
        keyed("ko2", "b", 5);
        let claimed = ids("SELECT id FROM jq_claim('ko2', 'w', batch_size => 10)");
        assert_eq!(claimed.iter().filter(|id| a.contains(id)).count(), 3, "{claimed:?}");
        assert_eq!(claimed.len(), 4, "and b's one: {claimed:?}");
        let settings = one::<pgrx::JsonB>("SELECT jq_configure_key('ko2', 'a', '{\"concurrency_limit\": null}')").0;
        assert_eq!(settings, serde_json::json!({"concurrency_limit": null, "weight": 1}));
    }

    /// A key's own limit set once the queue's claims have begun applies from the next claim: the
    /// session's settings, which said no key of the queue had one (so its claims looked none up),
    /// are forgotten when jq_key_settings changes.
    #[pg_test]
    fn a_keys_own_limit_set_later_applies_from_the_next_claim() {
        run("SELECT jq_configure('ko3', '{\"key_concurrency_limit\": 1}')");
        let a = keyed("ko3", "a", 5);
        assert_eq!(ids("SELECT id FROM jq_claim('ko3', 'w', batch_size => 10)"), vec![a[0]]);
        run("SELECT jq_configure_key('ko3', 'a', '{\"concurrency_limit\": 3}')");
        assert_eq!(ids("SELECT id FROM jq_claim('ko3', 'w', batch_size => 10) ORDER BY id"), vec![a[1], a[2]]);
        run("DELETE FROM jq_key_settings WHERE queue_name = 'ko3'");
        let token = one::<i64>(&format!("SELECT lease_token FROM jq_jobs WHERE id = {}", a[0]));
        assert!(complete(a[0], "w", token));
        assert_eq!(ids("SELECT id FROM jq_claim('ko3', 'w', batch_size => 10)"), Vec::<i64>::new(), "1 again");
    }

    /// An operator can tell "slow because limited" from "slow because no workers": each limit's
    /// held-back jobs in jq_queue_stats, jq_queue_health and jq_metrics().
    #[pg_test]
    fn the_figures_show_the_jobs_each_limit_holds_back() {
        run("SELECT jq_configure('h1', '{\"concurrency_limit\": 1}')");
        run("SELECT jq_configure('h2', '{\"key_concurrency_limit\": 1}')");
        run("SELECT jq_configure('h3', '{\"rate_limit\": 1, \"rate_period\": \"50 years\"}')");
        run("SELECT jq_configure('h4', '{\"key_rate_limit\": 1, \"key_rate_period\": \"50 years\"}')");
        for queue in ["h1", "h2", "h3", "h4"] {
            keyed(queue, "a", 3);
            keyed(queue, "b", 1);
            assert_eq!(ids(&format!("SELECT id FROM jq_claim('{queue}', 'w')")).len(), 1);
        }
        let held = one::<String>(
            "SELECT string_agg(format('%s %s %s %s %s', queue_name, held_by_concurrency_limit, held_by_key_limit,
                                      held_by_rate_limit, held_by_key_rate_limit), ', ' ORDER BY queue_name)
             FROM jq_queue_stats WHERE queue_name LIKE 'h_'",
        );
        // Each queue claimed one job of key a (the first key): the queue-wide limits hold back its
        // other three jobs, the key-wide ones a's other two.
        assert_eq!(held, "h1 3 0 0 0, h2 0 2 0 0, h3 0 0 3 0, h4 0 0 0 2");
        let health = one::<String>(
            "SELECT string_agg(held_back::text, ',' ORDER BY queue_name) FROM jq_queue_health WHERE queue_name LIKE 'h_'",
        );
        assert_eq!(health, "3,2,3,2");
        let metrics = one::<String>("SELECT jq_metrics()");
        assert!(metrics.contains("jq_held_back_jobs{queue=\"h2\",limit=\"key_concurrency_limit\"} 2"), "{metrics}");
        assert!(metrics.contains("jq_held_back_jobs{queue=\"h3\",limit=\"rate_limit\"} 3"), "{metrics}");
    }

    /// A paused queue's claimable jobs are counted as pending, and as held back by the pause, so
    /// that a paused queue does not read as one that lacks workers.
    #[pg_test]
    fn the_figures_show_the_jobs_a_pause_holds_back() {
        run("SELECT jq_configure('p1', '{\"paused\": true}')");
        keyed("p1", "a", 2);
        run("SELECT jq_enqueue('p2', '{}')");
        let stats = one::<String>(
            "SELECT string_agg(format('%s %s %s', queue_name, pending, held_by_pause), ', ' ORDER BY queue_name)
             FROM jq_queue_stats WHERE queue_name LIKE 'p_'",
        );
        assert_eq!(stats, "p1 2 2, p2 1 0");
        let health = one::<String>(
            "SELECT string_agg(format('%s %s', held_back, paused), ',' ORDER BY queue_name)
             FROM jq_queue_health WHERE queue_name LIKE 'p_'",
        );
        assert_eq!(health, "2 t,0 f");
        let metrics = one::<String>("SELECT jq_metrics()");
        assert!(metrics.contains("jq_held_back_jobs{queue=\"p1\",limit=\"pause\"} 2"), "{metrics}");
        run("SELECT jq_configure('p1', '{\"paused\": false}')");
        assert_eq!(one::<i64>("SELECT held_by_pause FROM jq_queue_stats WHERE queue_name = 'p1'"), 0);
    }

    /// Within a key, the starvation limit keeps its meaning: a job of the key claimable for longer
    /// than the limit goes before the key's fresher, higher-priority jobs, oldest first.
    #[pg_test]
    fn a_starving_job_of_a_key_goes_before_its_fresher_higher_priorities() {
        run("SELECT jq_configure('ks', '{\"starvation_limit\": \"1 minute\"}')");
        let fresh_high = one::<i64>("SELECT jq_enqueue('ks', '{}', priority => 100, concurrency_key => 'a')");
        let waiting_low = one::<i64>(
            "SELECT jq_enqueue('ks', '{}', priority => -5, run_at => clock_timestamp() - interval '30 s',
                               concurrency_key => 'a')",
        );
        let starving_mid = one::<i64>(
            "SELECT jq_enqueue('ks', '{}', priority => 3, run_at => clock_timestamp() - interval '2 minutes',
                               concurrency_key => 'a')",
        );
        let starving_low = one::<i64>(
            "SELECT jq_enqueue('ks', '{}', priority => -10, run_at => clock_timestamp() - interval '5 minutes',
                               concurrency_key => 'a')",
        );
        let order: Vec<i64> = (0..4).flat_map(|_| ids("SELECT id FROM jq_claim('ks', 'w')")).collect();
        assert_eq!(order, vec![starving_low, starving_mid, fresh_high, waiting_low]);
        one::<i64>("SELECT jq_enqueue('ks', '{}', priority => 1, concurrency_key => 'b')");
        let old = one::<i64>(
            "SELECT jq_enqueue('ks', '{}', run_at => clock_timestamp() - interval '2 minutes', concurrency_key => 'b')",
        );
        let batch = ids("SELECT id FROM jq_claim('ks', 'w', batch_size => 2)");
        assert_eq!(batch.first(), Some(&old), "in a batch, too, the starving job comes first: {batch:?}");
    }

    #[pg_test]
    fn a_keyed_job_is_claimed_in_claim_order_within_its_key() {
        let low = one::<i64>("SELECT jq_enqueue('ko', '{}', priority => 1, concurrency_key => 'a')");
        let high = one::<i64>("SELECT jq_enqueue('ko', '{}', priority => 9, concurrency_key => 'a')");
        let later = one::<i64>(
            "SELECT jq_enqueue('ko', '{}', run_at => clock_timestamp() + interval '1 hour', concurrency_key => 'a')",
        );
        assert_eq!(ids("SELECT id FROM jq_claim('ko', 'w', batch_size => 10)"), vec![high, low]);
        assert_eq!(status(later), "pending");
        assert_eq!(one::<String>(&format!("SELECT concurrency_key FROM jq_jobs WHERE id = {high}")), "a");
    }
}
