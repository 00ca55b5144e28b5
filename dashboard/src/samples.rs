//! The dashboard's own samples: every few seconds the counters (claims, completions) and the
//! backlog of every visible queue, kept for an hour. Rates, recent completions and the charts are
//! differences between samples, so nothing reads the history of finished jobs.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::db::{sql, DbError, Pool, NO_EXTENSION};

/// How often the sampler samples.
pub const INTERVAL: Duration = Duration::from_secs(5);
/// How long samples are kept: the charts' span.
pub const SPAN: f64 = 3600.0;
/// The window of the per-second rates on the overview.
pub const RATE_WINDOW: f64 = 60.0;

/// One queue in one round. Counters are absent without the library preloaded.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    pub counted: bool,
    pub claims: i64,
    pub completions: i64,
    /// Pending and scheduled.
    pub backlog: u32,
    pub running: u32,
    pub dead: u32,
}

/// One sampling pass: when (Unix seconds), and each queue by its number in `Store::names`.
#[derive(Debug, Clone)]
pub struct Round {
    pub at: f64,
    pub queues: Vec<(u32, Sample)>,
}

impl Round {
    fn get(&self, queue: u32) -> Option<&Sample> {
        self.queues.binary_search_by_key(&queue, |(id, _)| *id).ok().map(|at| &self.queues[at].1)
    }
}

#[derive(Debug, Default)]
pub struct Store {
    rounds: VecDeque<Round>,
    /// Queue names by number, so that a round holds no strings.
    names: Vec<String>,
    numbers: HashMap<String, u32>,
}

/// A point of a chart: seconds before now, and the value.
pub type Point = (f64, f64);

impl Store {
    fn number(&mut self, queue: &str) -> u32 {
        if let Some(&number) = self.numbers.get(queue) {
            return number;
        }
        let number = self.names.len() as u32;
        self.names.push(queue.to_owned());
        self.numbers.insert(queue.to_owned(), number);
        number
    }

    /// Adds a round taken at `at`, and forgets the rounds older than the span.
    pub fn add(&mut self, at: f64, queues: Vec<(String, Sample)>) {
        let mut queues: Vec<(u32, Sample)> =
            queues.into_iter().map(|(name, sample)| (self.number(&name), sample)).collect();
        queues.sort_by_key(|(id, _)| *id);
        self.rounds.push_back(Round { at, queues });
        while self.rounds.front().is_some_and(|round| round.at < at - SPAN) {
            self.rounds.pop_front();
        }
    }

    /// Claims and completions per second of `queue`, from the first round within the window
    /// before `now` to the counters read now.
    pub fn rates(&self, queue: &str, now: f64, claims: i64, completions: i64) -> Option<(f64, f64)> {
        let number = *self.numbers.get(queue)?;
        let (at, then) =
            self.rounds.iter().filter(|round| round.at >= now - RATE_WINDOW && round.at < now).find_map(|round| {
                round.get(number).filter(|sample| sample.counted).map(|sample| (round.at, *sample))
            })?;
        let seconds = now - at;
        (seconds >= 1.0).then(|| {
            (increase(then.claims, claims) as f64 / seconds, increase(then.completions, completions) as f64 / seconds)
        })
    }

    /// Completions of `queue` over the kept span, up to the counter read now: the recent
    /// successes, counted rather than read from the history. A counter that went back (a reset,
    /// a server restart) counts from zero again.
    pub fn completions_in_span(&self, queue: &str, completions_now: i64) -> Option<i64> {
        let number = *self.numbers.get(queue)?;
        let mut counted = self.rounds.iter().filter_map(|round| round.get(number)).filter(|sample| sample.counted);
        let mut last = counted.next()?.completions;
        let mut total = 0;
        for sample in counted {
            total += increase(last, sample.completions);
            last = sample.completions;
        }
        Some(total + increase(last, completions_now))
    }

    /// The charts' series over the span: claims and completions per second between rounds, and
    /// the backlog, running and dead jobs at each round; of one queue, or summed over all.
    pub fn series(&self, queue: Option<&str>, now: f64) -> Series {
        let number = match queue {
            Some(name) => match self.numbers.get(name) {
                Some(&number) => Some(number),
                None => return Series::default(),
            },
            None => None,
        };
        let total = |round: &Round| -> Sample {
            let mut sum = Sample::default();
            let mut add = |sample: &Sample| {
                sum.counted |= sample.counted;
                sum.claims += sample.claims;
                sum.completions += sample.completions;
                sum.backlog = sum.backlog.saturating_add(sample.backlog);
                sum.running = sum.running.saturating_add(sample.running);
                sum.dead = sum.dead.saturating_add(sample.dead);
            };
            match number {
                Some(number) => round.get(number).into_iter().for_each(&mut add),
                None => round.queues.iter().for_each(|(_, sample)| add(sample)),
            }
            sum
        };
        let mut series = Series::default();
        let mut previous: Option<(f64, Sample, &Round)> = None;
        for round in &self.rounds {
            let sample = total(round);
            let ago = now - round.at;
            series.backlog.push((ago, f64::from(sample.backlog)));
            series.running.push((ago, f64::from(sample.running)));
            series.dead.push((ago, f64::from(sample.dead)));
            if let Some((at, before, before_round)) = previous {
                let seconds = round.at - at;
                if sample.counted && before.counted && seconds > 0.0 {
                    // Per queue, so that a queue appearing or a counter reset adds no jump.
                    let (claims, completions) = match number {
                        Some(number) => pair_increase(before_round.get(number), round.get(number)),
                        None => round.queues.iter().fold((0, 0), |(c, d), (id, now)| {
                            let (dc, dd) = pair_increase(before_round.get(*id), Some(now));
                            (c + dc, d + dd)
                        }),
                    };
                    series.claims.push((ago, claims as f64 / seconds));
                    series.completions.push((ago, completions as f64 / seconds));
                }
            }
            previous = Some((round.at, sample, round));
        }
        series
    }

    #[cfg(test)]
    pub fn rounds(&self) -> usize {
        self.rounds.len()
    }
}

fn pair_increase(before: Option<&Sample>, now: Option<&Sample>) -> (i64, i64) {
    match (before, now) {
        (Some(before), Some(now)) if before.counted && now.counted => {
            (increase(before.claims, now.claims), increase(before.completions, now.completions))
        }
        _ => (0, 0),
    }
}

/// How much a counter grew; after a reset, what it counted since.
fn increase(before: i64, now: i64) -> i64 {
    if now >= before {
        now - before
    } else {
        now
    }
}

#[derive(Debug, Default, PartialEq)]
pub struct Series {
    pub claims: Vec<Point>,
    pub completions: Vec<Point>,
    pub backlog: Vec<Point>,
    pub running: Vec<Point>,
    pub dead: Vec<Point>,
}

pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// Samples every `INTERVAL` until the process ends. A failed pass is skipped: a gap in the charts.
/// In a database without the extension (the connection string of `--metrics-all-databases` often
/// names one) it skips the next `NO_EXTENSION_TICKS` intervals, asking again a minute later rather
/// than connecting every 5 s for nothing.
pub async fn run(pool: Arc<Pool>, store: Arc<Mutex<Store>>) {
    let mut ticker = tokio::time::interval(INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut skip = 0;
    loop {
        ticker.tick().await;
        if skip > 0 {
            skip -= 1;
            continue;
        }
        match sample(&pool).await {
            Ok(round) => store.lock().unwrap().add(unix_now(), round),
            Err(DbError::Unavailable(message)) if message == NO_EXTENSION => skip = NO_EXTENSION_TICKS,
            Err(_) => {}
        }
    }
}

/// The intervals skipped after a pass found no extension: with its own, a minute.
const NO_EXTENSION_TICKS: u32 = 11;

async fn sample(pool: &Arc<Pool>) -> Result<Vec<(String, Sample)>, crate::db::DbError> {
    let client = pool.get().await?;
    let mut queues: HashMap<String, Sample> = HashMap::new();
    for row in client.query(sql::BACKLOG, &[]).await? {
        let count = |i: usize| u32::try_from(row.get::<_, i64>(i)).unwrap_or(u32::MAX);
        queues.insert(
            row.get(0),
            Sample {
                backlog: count(1).saturating_add(count(2)),
                running: count(3),
                dead: count(4),
                ..Sample::default()
            },
        );
    }
    // Without EXECUTE on the counters (a role that sees no queue) the charts show the backlog only.
    if let Ok(rows) = client.query(sql::COUNTERS, &[]).await {
        for row in rows {
            let sample = queues.entry(row.get(0)).or_default();
            sample.counted = true;
            sample.claims = row.get(1);
            sample.completions = row.get(2);
        }
    }
    Ok(queues.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the guide's chapter "Dashboard" says one queue's sample costs in memory.
    #[test]
    fn a_queue_in_a_round_takes_40_bytes() {
        assert_eq!(std::mem::size_of::<(u32, Sample)>(), 40);
    }

    fn counted(claims: i64, completions: i64, backlog: u32) -> Sample {
        Sample { counted: true, claims, completions, backlog, running: 1, dead: 0 }
    }

    #[test]
    fn rates_over_the_window_up_to_now() {
        let mut store = Store::default();
        store.add(1000.0, vec![("a".into(), counted(0, 0, 10))]);
        store.add(1050.0, vec![("a".into(), counted(100, 50, 10))]);
        // From the first round within 60 s of now (1000) to the counters read now.
        assert_eq!(store.rates("a", 1050.0, 200, 100), Some((4.0, 2.0)));
        assert_eq!(store.rates("b", 1050.0, 1, 1), None, "never sampled");
        // Too old a round is left out; with none left there is no rate.
        assert_eq!(store.rates("a", 1200.0, 1, 1), None);
    }

    #[test]
    fn completions_survive_a_counter_reset() {
        let mut store = Store::default();
        store.add(0.0, vec![("a".into(), counted(0, 10, 0))]);
        store.add(5.0, vec![("a".into(), counted(0, 30, 0))]);
        store.add(10.0, vec![("a".into(), counted(0, 5, 0))]); // reset: 5 since
        assert_eq!(store.completions_in_span("a", 8), Some(20 + 5 + 3));
    }

    #[test]
    fn old_rounds_are_forgotten() {
        let mut store = Store::default();
        for i in 0..1000 {
            store.add(f64::from(i) * 5.0, vec![("a".into(), counted(i64::from(i), 0, 0))]);
        }
        assert_eq!(store.rounds(), 721, "an hour of rounds 5 s apart, both ends kept");
    }

    #[test]
    fn series_per_queue_and_summed() {
        let mut store = Store::default();
        store.add(0.0, vec![("a".into(), counted(0, 0, 4)), ("b".into(), counted(10, 0, 6))]);
        store.add(10.0, vec![("a".into(), counted(20, 10, 2)), ("b".into(), counted(30, 0, 1))]);
        let all = store.series(None, 10.0);
        assert_eq!(all.backlog, vec![(10.0, 10.0), (0.0, 3.0)]);
        assert_eq!(all.claims, vec![(0.0, 4.0)]);
        assert_eq!(all.completions, vec![(0.0, 1.0)]);
        let a = store.series(Some("a"), 10.0);
        assert_eq!(a.claims, vec![(0.0, 2.0)]);
        assert_eq!(store.series(Some("zzz"), 10.0), Series::default());
    }
}
