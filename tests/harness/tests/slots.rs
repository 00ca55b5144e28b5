//! The shared-memory tables, which every database of the server shares when the library is
//! preloaded: no role (or database) can reach another's queue through them, or take their room
//! (`src/shared/queue_key.rs`, "The share rule").
//!
//! Some tests name queues that shared a slot with another's queue in the library before these
//! rules: the slot was the hash of the queue's database and name (Rust's `DefaultHasher`, with its
//! fixed keys) modulo 1024. `slot_sharer` finds such names, so each test shows that sharing that
//! slot no longer shares anything.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use jq_harness::client::{connect_as, entries_read_behind_an_old_snapshot};
use jq_harness::{Client, Cluster};
use postgres::fallible_iterator::FallibleIterator;

const PRELOAD: &str = "shared_preload_libraries = 'pg_jobqueue'";

fn database_oid(client: &mut Client) -> u32 {
    let oid: i64 =
        client.query_one("SELECT oid::int8 FROM pg_database WHERE datname = current_database()", &[]).unwrap().get(0);
    u32::try_from(oid).unwrap()
}

/// The slot of a queue in the tables of 1024 slots before the whole key was kept.
fn unkeyed_slot(database: u32, queue: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (database, queue).hash(&mut hasher);
    hasher.finish() % 1024
}

/// A queue `prefix.N` of `database` that had the slot of `queue` of `victim_database`.
fn slot_sharer(database: u32, prefix: &str, victim_database: u32, queue: &str) -> String {
    let slot = unkeyed_slot(victim_database, queue);
    (0..1_000_000)
        .map(|n| format!("{prefix}.{n}"))
        .find(|name| unkeyed_slot(database, name) == slot)
        .expect("a name with the same slot")
}

/// The `jq_*` notifications `listener` receives before the `marker` notification whose payload is
/// `round`, which the caller sends after the transactions under test: NOTIFYs arrive in commit
/// order. A marker of an earlier round (sent for another listener) ends what that round sent.
fn notifications_before_marker(listener: &mut Client, round: &str) -> Vec<String> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let mut notifications = listener.notifications();
        let mut iter = notifications.timeout_iter(Duration::from_millis(200));
        while let Some(n) = iter.next().unwrap() {
            match n.channel() {
                "marker" if n.payload() == round => return seen,
                "marker" => seen.clear(),
                channel => seen.push(channel.to_owned()),
            }
        }
    }
    panic!("the marker notification never came");
}

/// Enqueues one job into `queue` as `producer`, then sends a marker of its own: what `hearer`
/// hears before it is what that enqueue notified.
fn heard_after_enqueue(producer: &mut Client, hearer: &mut Client, queue: &str) -> Vec<String> {
    static ROUNDS: AtomicU64 = AtomicU64::new(0);
    let round = ROUNDS.fetch_add(1, Ordering::SeqCst).to_string();
    producer.batch_execute(&format!("SELECT jq_enqueue('{queue}', '{{}}'); NOTIFY marker, '{round}'")).unwrap();
    notifications_before_marker(hearer, &round)
}

/// A role with the consume right on its own queues LISTENs on a queue that had the victim's slot,
/// in the victim's database and in another: the victim's producers still send no NOTIFY, because
/// nobody who may consume the victim's queue listens. The `hearer` has no right on anything, so its
/// own LISTEN counts for nothing; it only shows whether a NOTIFY was sent.
#[test]
fn a_listen_counts_for_its_own_queue_only_never_for_one_that_shared_its_slot() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut owner = cluster.connect();
    owner
        .batch_execute(
            "CREATE ROLE outsider LOGIN; CREATE ROLE hearer LOGIN; CREATE ROLE producer LOGIN;
             SELECT jq_grant('outsider', 'x.*', 'consume'); SELECT jq_grant('producer', 'victim', 'enqueue')",
        )
        .unwrap();
    owner.batch_execute("CREATE DATABASE second").unwrap();
    let mut second = connect_as(&cluster, "second", "postgres");
    second.batch_execute("CREATE EXTENSION pg_jobqueue; SELECT jq_grant('outsider', 'x.*', 'consume')").unwrap();
    let (postgres_oid, second_oid) = (database_oid(&mut owner), database_oid(&mut second));
    let same_database = slot_sharer(postgres_oid, "x", postgres_oid, "victim");
    let other_database = slot_sharer(second_oid, "x", postgres_oid, "victim");

    let mut hearer = connect_as(&cluster, "postgres", "hearer");
    hearer.batch_execute(r#"LISTEN "jq_victim"; LISTEN marker"#).unwrap();
    let mut producer = connect_as(&cluster, "postgres", "producer");
    assert_eq!(heard_after_enqueue(&mut producer, &mut hearer, "victim"), Vec::<String>::new(), "nobody counts yet");

    // In another database first, then in the victim's: each LISTEN counts for the outsider's own
    // queue, and for nothing else.
    let mut outsider_elsewhere = connect_as(&cluster, "second", "outsider");
    outsider_elsewhere.batch_execute(&format!(r#"LISTEN "jq_{other_database}"; LISTEN marker"#)).unwrap();
    assert_eq!(
        heard_after_enqueue(&mut second, &mut outsider_elsewhere, &other_database),
        vec![format!("jq_{other_database}")],
        "the outsider's own queue in the other database"
    );
    assert_eq!(
        heard_after_enqueue(&mut producer, &mut hearer, "victim"),
        Vec::<String>::new(),
        "a LISTEN on {other_database} in another database switched the victim's NOTIFY on"
    );
    let mut outsider = connect_as(&cluster, "postgres", "outsider");
    outsider.batch_execute(&format!(r#"LISTEN "jq_{same_database}"; LISTEN marker"#)).unwrap();
    assert_eq!(
        heard_after_enqueue(&mut owner, &mut outsider, &same_database),
        vec![format!("jq_{same_database}")],
        "the outsider's own queue"
    );
    assert_eq!(
        heard_after_enqueue(&mut producer, &mut hearer, "victim"),
        Vec::<String>::new(),
        "a LISTEN on {same_database} switched the victim's NOTIFY on"
    );

    // A consumer of the victim's queue does switch it on.
    owner.batch_execute("CREATE ROLE consumer LOGIN; SELECT jq_grant('consumer', 'victim', 'consume')").unwrap();
    let mut consumer = connect_as(&cluster, "postgres", "consumer");
    consumer.batch_execute(r#"LISTEN "jq_victim""#).unwrap();
    assert_eq!(heard_after_enqueue(&mut producer, &mut hearer, "victim"), vec!["jq_victim".to_owned()]);
}

/// Only a role that may consume the queue's jobs can use its wake-ups, so only its LISTEN switches
/// the queue's NOTIFY on: not a member of pg_monitor, nor a role with the monitor, enqueue or
/// manage right.
#[test]
fn only_a_listen_of_a_role_that_may_consume_switches_notify_on() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut owner = cluster.connect();
    owner
        .batch_execute(
            "CREATE ROLE hearer LOGIN; CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
             CREATE ROLE monitor LOGIN; CREATE ROLE enqueuer LOGIN; CREATE ROLE manager LOGIN; CREATE ROLE consumer LOGIN;
             SELECT jq_grant('monitor', 'q', 'monitor'); SELECT jq_grant('enqueuer', 'q', 'enqueue');
             SELECT jq_grant('manager', 'q', 'manage'); SELECT jq_grant('consumer', 'q', 'consume')",
        )
        .unwrap();
    let mut hearer = connect_as(&cluster, "postgres", "hearer");
    hearer.batch_execute(r#"LISTEN "jq_q"; LISTEN marker"#).unwrap();
    let mut listeners = Vec::new();
    for role in ["watcher", "monitor", "enqueuer", "manager"] {
        let mut listener = connect_as(&cluster, "postgres", role);
        listener.batch_execute(r#"LISTEN "jq_q""#).unwrap();
        listeners.push(listener);
        assert_eq!(
            heard_after_enqueue(&mut owner, &mut hearer, "q"),
            Vec::<String>::new(),
            "the LISTEN of {role} switched NOTIFY on"
        );
    }
    let mut consumer = connect_as(&cluster, "postgres", "consumer");
    consumer.batch_execute(r#"LISTEN "jq_q""#).unwrap();
    assert_eq!(heard_after_enqueue(&mut owner, &mut hearer, "q"), vec!["jq_q".to_owned()]);
}

/// A session counts as a listener of at most 32 queues (`LISTENS_PER_SESSION`): the table has room
/// for every session's, so nobody can fill it. A LISTEN past the limit is not counted, and is
/// logged once and counted in jq_metrics() for its database.
#[test]
fn a_listen_past_a_sessions_limit_is_not_counted_and_is_logged_once() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut owner = cluster.connect();
    owner.batch_execute("CREATE ROLE hearer LOGIN").unwrap();
    // The hearer holds no right: its LISTEN counts for nothing.
    let mut hearer = connect_as(&cluster, "postgres", "hearer");
    hearer.batch_execute(r#"LISTEN "jq_l.32"; LISTEN marker"#).unwrap();
    // Two sessions that each LISTEN on 40 queues: the first 32 count, the rest do not.
    for session in 0..2 {
        let mut many = cluster.connect();
        let listens: String = (0..40).map(|n| format!(r#"LISTEN "jq_l.{n}"; "#)).collect();
        many.batch_execute(&format!("{listens} LISTEN marker")).unwrap();
        assert_eq!(heard_after_enqueue(&mut owner, &mut hearer, "l.32"), Vec::<String>::new(), "l.32 counted");
        assert_eq!(heard_after_enqueue(&mut owner, &mut many, "l.31"), vec!["jq_l.31".to_owned()], "session {session}");
    }
    let metrics: String = owner.query_one("SELECT jq_metrics()", &[]).unwrap().get(0);
    assert!(metrics.contains("jq_shared_slots_refused_total{table=\"listeners\"} 16\n"), "{metrics}");
    assert_eq!(cluster.log().matches("does not count as a listener of queue").count(), 1, "{}", cluster.log());
}

/// One role that may create queue names (`spam.*`) counts work in far more queues than the table
/// has entries: it takes at most half of them, and another role's queue of its database and a queue
/// of another database each still get counters of their own. The refusals are logged once per
/// database and counted in jq_metrics().
#[test]
fn one_role_cannot_take_the_counter_entries_of_other_roles_or_databases() {
    let cluster = Cluster::start_with(&[
        PRELOAD,
        "pg_jobqueue.stats_max_queues = 16",
        "pg_jobqueue.reaper_enabled = off",
        "pg_jobqueue.inline_reap_max = 0",
    ]);
    let mut owner = cluster.connect();
    owner
        .batch_execute(
            "CREATE ROLE spammer LOGIN; CREATE ROLE worker LOGIN;
             SELECT jq_grant('spammer', 'spam.*', 'enqueue'); SELECT jq_grant('spammer', 'spam.*', 'consume');
             SELECT jq_grant('worker', 'mine', 'enqueue'); SELECT jq_grant('worker', 'mine', 'consume')",
        )
        .unwrap();
    owner.batch_execute("CREATE DATABASE second").unwrap();
    // Two sessions of the spammer: 40 queues, each with a committed claim.
    for sessions in [0..20, 20..40] {
        let mut spammer = connect_as(&cluster, "postgres", "spammer");
        for n in sessions {
            spammer
                .batch_execute(&format!(
                    "SELECT jq_enqueue('spam.{n}', '{{}}'); SELECT count(*) FROM jq_claim('spam.{n}', 'w')"
                ))
                .unwrap();
        }
    }
    let mut worker = connect_as(&cluster, "postgres", "worker");
    worker.batch_execute("SELECT jq_enqueue('mine', '{}'); SELECT count(*) FROM jq_claim('mine', 'w')").unwrap();
    let mut second = connect_as(&cluster, "second", "postgres");
    second
        .batch_execute(
            "CREATE EXTENSION pg_jobqueue; SELECT jq_enqueue('theirs', '{}'); SELECT count(*) FROM jq_claim('theirs', 'w')",
        )
        .unwrap();

    let claims = |c: &mut Client, queue: &str| -> Option<i64> {
        c.query_opt("SELECT claims FROM jq_queue_counters() WHERE queue_name = $1", &[&queue])
            .unwrap()
            .map(|r| r.get(0))
    };
    assert_eq!(claims(&mut owner, "mine"), Some(1), "another role's queue of the database has counters");
    assert_eq!(claims(&mut second, "theirs"), Some(1), "another database's queue has counters");
    let own: i64 =
        owner.query_one("SELECT count(*) FROM jq_queue_counters() WHERE queue_name LIKE 'spam.%'", &[]).unwrap().get(0);
    assert!(own <= 8, "the spammer took {own} of 16 entries");
    assert_eq!(claims(&mut owner, "*"), Some(40 - own), "the rest are counted under \"*\"");

    let metrics = |c: &mut Client| -> String { c.query_one("SELECT jq_metrics()", &[]).unwrap().get(0) };
    let refused = format!("jq_shared_slots_refused_total{{table=\"counters\"}} {}\n", 40 - own);
    assert!(metrics(&mut owner).contains(&refused), "{}", metrics(&mut owner));
    assert!(metrics(&mut second).contains("jq_shared_slots_refused_total{table=\"counters\"} 0\n"));
    let log = cluster.log();
    assert_eq!(log.matches("gets no counters of its own").count(), 1, "logged once:\n{log}");
}

/// Another role claims all the time from a queue of its own that had the slot of queue `q`: `q`
/// still has a claim front, and its claims behind an old snapshot skip what the snapshot keeps.
/// (Before, the busy queue kept the slot, and every claim of `q` walked from the start: 50 claims
/// read 100,000 entries.)
#[test]
fn a_busy_queue_of_another_role_does_not_keep_a_queue_from_its_claim_front() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut owner = cluster.connect();
    owner.batch_execute("CREATE ROLE hog LOGIN; SELECT jq_grant('hog', 'x.*', 'consume')").unwrap();
    let oid = database_oid(&mut owner);
    let hog_queue = slot_sharer(oid, "x", oid, "q");
    // Not due for an hour: each of the hog's claims reads its front and finds nothing.
    owner
        .batch_execute(&format!("SELECT jq_enqueue('{hog_queue}', '{{}}', run_at => now() + interval '1 hour')"))
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let mut hog = connect_as(&cluster, "postgres", "hog");
    let hogging = {
        let done = done.clone();
        thread::spawn(move || {
            let mut claims = 0u64;
            while !done.load(Ordering::SeqCst) {
                hog.batch_execute(&format!("SELECT count(*) FROM jq_claim('{hog_queue}', 'w')")).unwrap();
                claims += 1;
                // Often enough to keep a slot busy (it is free again after a second alone).
                thread::sleep(Duration::from_millis(20));
            }
            claims
        })
    };
    let read = entries_read_behind_an_old_snapshot(&cluster);
    done.store(true, Ordering::SeqCst);
    let hog_claims = hogging.join().unwrap();
    assert!(hog_claims > 0);
    assert!(read < 50 * 2000 / 4, "50 claims read {read} entries of the claim index");
}
