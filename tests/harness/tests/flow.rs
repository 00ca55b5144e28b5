//! Flow control under faults (guide, "Flow control"): sixteen claimers over 1,000 concurrency keys
//! with limits of 1 to 5 (one key with a backlog of 600 jobs, the others 3 each), a queue rate, workers whose connections are terminated, workers that
//! stall past their lease. Checked over the whole run: no key ever ran more jobs under a current
//! lease than its limit (a sampler reads the running jobs of every key in one snapshot, over and
//! over), no rate window admitted more claims than the rate, every (job, token) was handed out
//! once, every stale completion was refused, every job succeeded, and one key's backlog did not
//! hold back the other keys: before every other key had been served once, the big key was served
//! at most twice per claiming session (the rotation's bound). Durations are printed, never asserted.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use jq_harness::{Client, Cluster};

const PRELOAD: &str = "shared_preload_libraries = 'pg_jobqueue'";
const KEYS: usize = 1000;
const BIG_BACKLOG: i32 = 600;
const SMALL_BACKLOG: i32 = 3;
const CLAIMERS: usize = 16;
const RATE_PER_SECOND: i64 = 100;

/// One claim as its claimer was handed it.
#[derive(Clone, Debug)]
struct Claim {
    session: usize,
    job: i64,
    token: i64,
    key: String,
    /// The claim's database clock, in microseconds since the Unix epoch.
    at_micros: i64,
}

#[test]
fn flow_control_holds_under_sixteen_claimers_killed_workers_and_expiring_leases() {
    let cluster = Arc::new(Cluster::start_with(&[PRELOAD, "pg_jobqueue.reaper_interval = '200ms'"]));
    let mut admin = cluster.connect();
    admin
        .batch_execute(&format!(
            "SELECT jq_configure('flow', '{{\"key_concurrency_limit\": 3, \"rate_limit\": {RATE_PER_SECOND},
                                             \"rate_period\": \"1 second\"}}');
             SELECT count(jq_configure_key('flow', 'k' || lpad(k::text, 4, '0'),
                                           jsonb_build_object('concurrency_limit', 1 + k % 5)))
             FROM generate_series(0, {last}) k;
             -- The big key may run five at once, so that its backlog drains in the run's time.
             SELECT jq_configure_key('flow', 'k0000', '{{\"concurrency_limit\": 5}}');
             SELECT count(*) FROM generate_series(1, {BIG_BACKLOG} / 100) part,
                  LATERAL jq_enqueue_batch('flow', array_fill(jsonb_build_object('key', 'k0000', 'part', part), ARRAY[100]),
                                           concurrency_key => 'k0000');
             SELECT count(*) FROM generate_series(1, {last}) k,
                  LATERAL jq_enqueue_batch('flow',
                      array_fill(jsonb_build_object('key', 'k' || lpad(k::text, 4, '0')), ARRAY[{SMALL_BACKLOG}]),
                      concurrency_key => 'k' || lpad(k::text, 4, '0'));",
            last = KEYS - 1
        ))
        .unwrap();
    let jobs = i64::from(BIG_BACKLOG) + (KEYS as i64 - 1) * i64::from(SMALL_BACKLOG);

    let stop = Arc::new(AtomicBool::new(false));
    let sessions = Arc::new(AtomicUsize::new(0));
    let claims: Arc<Mutex<Vec<Claim>>> = Arc::new(Mutex::new(Vec::new()));
    let stale_accepted = Arc::new(AtomicUsize::new(0));
    let stalled = Arc::new(AtomicUsize::new(0));

    // The sampler: in one snapshot, every key whose jobs under a current lease exceed its limit.
    let sampler = {
        let (mut client, stop) = (cluster.connect(), stop.clone());
        thread::spawn(move || {
            let (mut samples, mut violations) = (0, Vec::new());
            while !stop.load(Ordering::SeqCst) {
                for row in client
                    .query(
                        "SELECT j.concurrency_key, count(*), coalesce(s.concurrency_limit, 3)
                         FROM jq_live_jobs j
                         LEFT JOIN jq_key_settings s ON s.queue_name = 'flow' AND s.concurrency_key = j.concurrency_key
                         WHERE j.status = 'running' AND j.lease_expires_at > clock_timestamp()
                         GROUP BY j.concurrency_key, s.concurrency_limit
                         HAVING count(*) > coalesce(s.concurrency_limit, 3)",
                        &[],
                    )
                    .unwrap()
                {
                    violations.push((row.get::<_, String>(0), row.get::<_, i64>(1), row.get::<_, i32>(2)));
                }
                samples += 1;
                thread::sleep(Duration::from_millis(2));
            }
            (samples, violations)
        })
    };

    // The chaos: every 300 ms a claimer's backend is terminated, wherever it is.
    let chaos = {
        let (mut client, stop) = (cluster.connect(), stop.clone());
        thread::spawn(move || {
            let mut terminated = 0;
            while !stop.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(300));
                let row = client
                    .query_one(
                        "SELECT count(pg_terminate_backend(pid)) FROM (
                             SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'claimer-%'
                             ORDER BY random() LIMIT 1) victim",
                        &[],
                    )
                    .unwrap();
                terminated += row.get::<_, i64>(0);
            }
            terminated
        })
    };

    let started = Instant::now();
    let claimers: Vec<_> = (0..CLAIMERS)
        .map(|c| {
            let (cluster, stop, sessions, claims) = (cluster.clone(), stop.clone(), sessions.clone(), claims.clone());
            let (stale_accepted, stalled) = (stale_accepted.clone(), stalled.clone());
            thread::spawn(move || {
                let batch: i32 = if c % 4 == 0 { 3 } else { 1 };
                while !stop.load(Ordering::SeqCst) {
                    // A session until its backend is terminated, or it dies by choice.
                    let session = sessions.fetch_add(1, Ordering::SeqCst);
                    let mut client = cluster.connect();
                    if client.batch_execute(&format!("SET application_name = 'claimer-{session}'")).is_err() {
                        continue;
                    }
                    let _ = run_session(&mut client, session, batch, &stop, &claims, &stale_accepted, &stalled);
                }
            })
        })
        .collect();

    let mut done = 0;
    while started.elapsed() < Duration::from_secs(240) {
        done =
            admin.query_one("SELECT count(*) FROM jq_jobs WHERE status = 'succeeded'", &[]).unwrap().get::<_, i64>(0);
        if done == jobs {
            break;
        }
        thread::sleep(Duration::from_millis(200));
    }
    stop.store(true, Ordering::SeqCst);
    for claimer in claimers {
        claimer.join().unwrap();
    }
    let terminated = chaos.join().unwrap();
    let (samples, violations) = sampler.join().unwrap();
    let claims = claims.lock().unwrap().clone();
    let sessions = sessions.load(Ordering::SeqCst);
    eprintln!(
        "{done} of {jobs} jobs in {:?}: {} claims, {sessions} sessions, {terminated} backends terminated, \
         {} stalled past their lease, {samples} samples of the running jobs",
        started.elapsed(),
        claims.len(),
        stalled.load(Ordering::SeqCst)
    );

    assert_eq!(done, jobs, "every job succeeded");
    assert!(violations.is_empty(), "keys ran more jobs than their limit: {violations:?}");
    assert_eq!(stale_accepted.load(Ordering::SeqCst), 0, "a completion after the lease expired was accepted");
    let unique: HashSet<(i64, i64)> = claims.iter().map(|c| (c.job, c.token)).collect();
    assert_eq!(unique.len(), claims.len(), "a (job, lease_token) was handed out twice");

    // The rate: claims per one-second window of their clock (windows start on the second).
    let mut per_window: HashMap<i64, i64> = HashMap::new();
    for claim in &claims {
        *per_window.entry(claim.at_micros.div_euclid(1_000_000)).or_default() += 1;
    }
    let busiest = per_window.values().copied().max().unwrap_or(0);
    let mut full: Vec<i64> = per_window.values().copied().collect();
    full.sort_unstable();
    eprintln!("claims per window: most {busiest}, median {} (rate {RATE_PER_SECOND})", full[full.len() / 2]);
    assert!(busiest <= RATE_PER_SECOND, "a window admitted {busiest} claims, the rate is {RATE_PER_SECOND}");

    // Fairness: the big key's backlog held back no other key for longer than the rotation's bound.
    let mut first_claim: HashMap<&str, i64> = HashMap::new();
    for claim in &claims {
        let at = first_claim.entry(claim.key.as_str()).or_insert(claim.at_micros);
        *at = (*at).min(claim.at_micros);
    }
    assert_eq!(first_claim.len(), KEYS, "every key was served");
    let every_other_key_served =
        first_claim.iter().filter(|(key, _)| **key != "k0000").map(|(_, at)| *at).max().unwrap();
    let before: Vec<&Claim> = claims.iter().filter(|c| c.at_micros < every_other_key_served).collect();
    let big_before = before.iter().filter(|c| c.key == "k0000").count();
    let sessions_before = before.iter().map(|c| c.session).collect::<HashSet<_>>().len();
    let first = claims.iter().map(|c| c.at_micros).min().unwrap();
    eprintln!(
        "every key served once {:.1} s into the run; by then the big key {big_before} times, over {sessions_before} sessions",
        (every_other_key_served - first) as f64 / 1e6
    );
    // A session's rotation visits each key once a round; every key had been served after one full
    // round of any session, so no session can have visited the big key more than twice. (In claim
    // order by id its 600 jobs, enqueued first, would all have gone before the other keys'.)
    assert!(
        big_before <= 2 * sessions_before,
        "the big key was served {big_before} times before every other key once, over {sessions_before} sessions"
    );
}

/// Claims and works jobs until the backend is terminated (an error) or `stop`; most jobs complete
/// after a short run, some stall past their lease first (their completion must be refused), and
/// some are abandoned by a session that ends without completing them.
fn run_session(
    client: &mut Client,
    session: usize,
    batch: i32,
    stop: &AtomicBool,
    claims: &Mutex<Vec<Claim>>,
    stale_accepted: &AtomicUsize,
    stalled: &AtomicUsize,
) -> Result<(), postgres::Error> {
    let worker = format!("w{session}");
    while !stop.load(Ordering::SeqCst) {
        let rows = client.query(
            "SELECT id, lease_token, payload->>'key',
                    (extract(epoch FROM lease_expires_at) * 1000000)::bigint - 1000000, attempt_count
             FROM jq_claim('flow', $1, interval '1 second', $2, wait => interval '200 ms')",
            &[&worker, &batch],
        )?;
        let got: Vec<(Claim, i32)> = rows
            .iter()
            .map(|r| (Claim { session, job: r.get(0), token: r.get(1), key: r.get(2), at_micros: r.get(3) }, r.get(4)))
            .collect();
        claims.lock().unwrap().extend(got.iter().map(|(claim, _)| claim.clone()));
        for (claim, attempt) in got {
            // Which fault a job meets on its first attempt, by its id; later attempts just run.
            match if attempt == 1 { claim.job.wrapping_mul(2_654_435_761).rem_euclid(100) } else { 99 } {
                // Abandoned: the session ends; the lease expires and the reaper returns the job.
                0..=2 => return Ok(()),
                // Stalled past the lease, with no heartbeat: the late completion is refused.
                3..=9 => {
                    stalled.fetch_add(1, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(1200));
                    let done: bool = client
                        .query_one("SELECT jq_complete($1, $2, $3)", &[&claim.job, &worker, &claim.token])?
                        .get(0);
                    if done {
                        stale_accepted.fetch_add(1, Ordering::SeqCst);
                    }
                }
                _ => {
                    thread::sleep(Duration::from_millis(20 + (claim.job % 20) as u64));
                    client.query_one("SELECT jq_complete($1, $2, $3)", &[&claim.job, &worker, &claim.token])?;
                }
            }
        }
    }
    Ok(())
}
