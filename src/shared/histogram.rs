//! Latency histogram maths, with no server in it: buckets 2^(1/4) apart from 1 ms, so a percentile
//! read from them is within 19% of the true value. Bucket 0 holds everything under 1 ms; bucket
//! i >= 1 holds [2^((i-1)/4), 2^(i/4)) ms; the last one is open above (12 days).

pub const BUCKETS: usize = 121;

/// The bucket of a duration in microseconds.
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
    if bucket == 0 {
        0.0
    } else {
        bucket_upper(bucket - 1)
    }
}

/// The `p`-quantile of `counts` in seconds, interpolated within its bucket; None without samples.
pub fn quantile(counts: &[u64; BUCKETS], p: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = p * total as f64;
    let mut below = 0u64;
    for (bucket, &n) in counts.iter().enumerate() {
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

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn each_duration_falls_in_the_bucket_whose_bounds_hold_it() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(999), 0);
        assert_eq!(bucket_of(1000), 1);
        for micros in [1_000u64, 1_500, 10_000, 123_456, 60_000_000, 3_600_000_000] {
            let bucket = bucket_of(micros);
            let seconds = micros as f64 / 1e6;
            assert!(
                bucket_lower(bucket) <= seconds * (1.0 + 1e-9) && seconds < bucket_upper(bucket),
                "{micros} µs in {bucket}"
            );
        }
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert!(bucket_upper(BUCKETS - 1).is_infinite());
    }

    #[test]
    fn a_quantile_is_within_its_bucket_and_19_percent_of_the_truth() {
        let mut counts = [0u64; BUCKETS];
        assert_eq!(quantile(&counts, 0.5), None);
        // 100 samples of 10 ms, 1..=100 ms in all.
        for ms in 1..=100u64 {
            counts[bucket_of(ms * 1000)] += 1;
        }
        for (p, truth) in [(0.5, 0.050), (0.95, 0.095), (0.99, 0.099)] {
            let estimate = quantile(&counts, p).unwrap();
            assert!((estimate - truth).abs() / truth < 0.19, "p{p}: {estimate} for {truth}");
        }
        let mut open = [0u64; BUCKETS];
        open[BUCKETS - 1] = 3;
        assert_eq!(quantile(&open, 0.5), Some(bucket_upper(BUCKETS - 2)), "the open bucket reports its lower bound");
    }
}
