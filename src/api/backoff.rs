//! Retry delays: exponential from a queue's `backoff_base`, capped at `backoff_cap`, with jitter.
//!
//! Computed here in whole microseconds with saturating arithmetic rather than in SQL, where
//! `base * power(2, n)` overflowed the interval type before `least()` could cap it (one job with a
//! long base and many attempts then made every reap pass of its database fail). No setting and no
//! attempt count can make this fail.

use pgrx::datum::Interval;
use pgrx::prelude::*;

use crate::input::nominal_micros;

extension_sql_file!("../../sql/schema/backoff.sql", name = "backoff", requires = [jq_backoff_delay]);

/// The delay before the next attempt after `attempt` failed attempts: `base * 2^(attempt - 1)`, at
/// most `cap`, times a uniform draw from [0.5, 1) ("equal jitter": a burst of failures spreads out,
/// yet no retry comes sooner than half the nominal delay). Months count as 30 days and days as 24
/// hours, as interval comparison counts them; the result is in plain time.
#[pg_extern(volatile, parallel_safe, strict)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_backoff_delay(base: Interval, cap: Interval, attempt: i32) -> Interval {
    // SAFETY: PostgreSQL's global generator, seeded per backend; a backend is one thread.
    let jitter = unsafe { pg_sys::pg_prng_double(&raw mut pg_sys::pg_global_prng_state) };
    Interval::from_micros(delay_micros(nominal_micros(base), nominal_micros(cap), attempt, jitter))
}

/// The delay in microseconds for a draw `jitter` in [0, 1). Negative settings count as zero.
pub fn delay_micros(base: i128, cap: i128, attempt: i32, jitter: f64) -> i64 {
    let doublings = attempt.clamp(1, 64) as u32 - 1;
    let base = base.clamp(0, i64::MAX as i128) as i64;
    let cap = cap.clamp(0, i64::MAX as i128) as i64;
    let nominal = base.checked_mul(1i64 << doublings.min(62)).unwrap_or(i64::MAX).min(cap);
    (nominal as f64 * (0.5 + jitter.clamp(0.0, 1.0) * 0.5)) as i64
}

#[cfg(test)]
mod unit {
    use super::delay_micros;

    const SECOND: i128 = 1_000_000;
    const HOUR: i128 = 3600 * SECOND;

    #[test]
    fn doubles_from_the_base_and_stops_at_the_cap() {
        assert_eq!(delay_micros(SECOND, HOUR, 1, 1.0), SECOND as i64);
        assert_eq!(delay_micros(SECOND, HOUR, 4, 1.0), 8 * SECOND as i64);
        assert_eq!(delay_micros(SECOND, HOUR, 40, 1.0), HOUR as i64);
        assert_eq!(delay_micros(SECOND, HOUR, 4, 0.0), 4 * SECOND as i64);
    }

    #[test]
    fn never_overflows_whatever_the_settings_and_attempts() {
        let century = 100 * 36525 * 24 * HOUR / 100;
        for attempt in [i32::MIN, -1, 0, 1, 33, 60, 63, 64, 65, i32::MAX] {
            for base in [0, 1, SECOND, HOUR, century, i64::MAX as i128, i128::MAX] {
                let delay = delay_micros(base, century, attempt, 0.999);
                assert!((0..=century as i64).contains(&delay), "{base} at {attempt}: {delay}");
            }
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn backoff_grows_exponentially_and_stops_at_the_cap() {
        run("INSERT INTO jq_queues (queue_name, backoff_base, backoff_cap) VALUES ('b', '1 s', '30 s')");
        let delays: Vec<f64> = (1..=8)
            .map(|attempt| one::<f64>(&format!("SELECT extract(epoch FROM jq_backoff('b', {attempt}))::float8")))
            .collect();
        for (i, d) in delays.iter().enumerate() {
            let nominal = f64::min(30.0, 2f64.powi(i as i32));
            assert!(
                *d >= nominal / 2.0 && *d <= nominal,
                "attempt {}: {d} outside [{}, {nominal}]",
                i + 1,
                nominal / 2.0
            );
        }
        assert!(one::<f64>("SELECT extract(epoch FROM jq_backoff('b', 1000))::float8") <= 30.0);
    }
}
