//! Wake-ups: NOTIFY after committed enqueues, and the waiting claim (jq_claim's `wait`), with and
//! without the library preloaded. Each waiting test sets `pg_jobqueue.wait_recheck` to an hour
//! where it checks a wake-up, so that only the wake-up under test can end the wait early.

use std::thread;
use std::time::{Duration, Instant};

use jq_harness::{wait_until, Client, Cluster};
use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;

const PRELOAD: &str = "shared_preload_libraries = 'pg_jobqueue'";

/// The `jq_*` notifications `listener` receives before the `marker` notification. NOTIFYs arrive in
/// commit order, so a marker sent after the transactions under test bounds what they sent.
fn notifications_before_marker(listener: &mut Client) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let mut notifications = listener.notifications();
        let mut iter = notifications.timeout_iter(Duration::from_millis(200));
        while let Some(n) = iter.next().unwrap() {
            if n.channel() == "marker" {
                return seen;
            }
            seen.push((n.channel().to_owned(), n.payload().to_owned()));
        }
    }
    panic!("the marker notification never came");
}

/// Without preload, a queue notifies once it asks (`notify = true`).
#[test]
fn a_committed_enqueue_notifies_once_per_queue_and_a_rolled_back_one_never() {
    let cluster = Cluster::start();
    cluster
        .connect()
        .batch_execute("INSERT INTO jq_queues (queue_name, notify) VALUES ('mail', true), ('sms', true)")
        .unwrap();
    committed_enqueues_notify(&cluster);
}

/// Preloaded, enqueues notify by default while someone listens: the same rules must hold.
#[test]
fn preloaded_a_committed_enqueue_notifies_once_per_queue_and_a_rolled_back_one_never() {
    committed_enqueues_notify(&Cluster::start_with(&[PRELOAD]));
}

fn committed_enqueues_notify(cluster: &Cluster) {
    let mut listener = cluster.connect();
    listener.batch_execute(r#"LISTEN "jq_mail"; LISTEN "jq_sms"; LISTEN marker"#).unwrap();
    let mut producer = cluster.connect();

    producer
        .batch_execute(
            "BEGIN; SELECT jq_enqueue('mail', '{}'); SELECT jq_enqueue('sms', '{}'); ROLLBACK; NOTIFY marker",
        )
        .unwrap();
    assert_eq!(notifications_before_marker(&mut listener), vec![], "a rolled-back enqueue notified");

    producer
        .batch_execute(
            "BEGIN;
             SELECT jq_enqueue('mail', '{\"to\": \"a\"}');
             SELECT jq_enqueue('mail', '{\"to\": \"b\"}');
             SELECT jq_enqueue_batch('mail', ARRAY['{}', '{}']::jsonb[]);
             SELECT jq_enqueue('sms', '{}');
             COMMIT;
             NOTIFY marker",
        )
        .unwrap();
    let mut got = notifications_before_marker(&mut listener);
    got.sort();
    // One per queue, and the payload carries no job data.
    assert_eq!(got, vec![("jq_mail".to_owned(), String::new()), ("jq_sms".to_owned(), String::new())]);

    // A savepoint rolled back takes its notification with it.
    producer
        .batch_execute("BEGIN; SAVEPOINT s; SELECT jq_enqueue('mail', '{}'); ROLLBACK TO s; COMMIT; NOTIFY marker")
        .unwrap();
    assert_eq!(notifications_before_marker(&mut listener), vec![]);
}

#[test]
fn notify_can_be_turned_off_per_queue() {
    let cluster = Cluster::start();
    cluster.connect().batch_execute("INSERT INTO jq_queues (queue_name, notify) VALUES ('loud', true)").unwrap();
    notify_switch(&cluster);
}

/// Without preload nobody can be seen listening, so a queue sends NOTIFY only once it asks: the
/// default installation does not pay for wake-ups nobody asked for.
#[test]
fn without_preload_a_queue_notifies_only_once_it_asks() {
    let cluster = Cluster::start();
    let mut listener = cluster.connect();
    listener.batch_execute(r#"LISTEN "jq_mail"; LISTEN marker"#).unwrap();
    let mut producer = cluster.connect();
    let expected = vec![("jq_mail".to_owned(), String::new())];
    for (settings, notified) in [("{}", false), (r#"{"notify": true}"#, true), (r#"{"notify": null}"#, false)] {
        // A new session each time: a session trusts what it read of the setting for a second.
        let mut admin = cluster.connect();
        admin.execute("SELECT jq_configure('mail', $1::text::jsonb)", &[&settings]).unwrap();
        producer = cluster.connect();
        producer.batch_execute("SELECT jq_enqueue('mail', '{}'); NOTIFY marker").unwrap();
        let got = notifications_before_marker(&mut listener);
        assert_eq!(got, if notified { expected.clone() } else { vec![] }, "with {settings}");
    }
    drop(producer);
}

/// Preloaded, `notify = true` sends NOTIFY even to a listener the count leaves out (a role with no
/// right on the queue), and the default does not.
#[test]
fn preloaded_notify_true_notifies_whoever_listens() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut admin = cluster.connect();
    admin.batch_execute("CREATE ROLE stranger LOGIN").unwrap();
    let mut listener = jq_harness::client::connect_as(&cluster, "postgres", "stranger");
    listener.batch_execute(r#"LISTEN "jq_mail"; LISTEN marker"#).unwrap();
    let mut producer = cluster.connect();
    producer.batch_execute("SELECT jq_enqueue('mail', '{}'); NOTIFY marker").unwrap();
    assert_eq!(notifications_before_marker(&mut listener), vec![]);
    admin.batch_execute(r#"SELECT jq_configure('mail', '{"notify": true}')"#).unwrap();
    let mut producer = cluster.connect();
    producer.batch_execute("SELECT jq_enqueue('mail', '{}'); NOTIFY marker").unwrap();
    assert_eq!(notifications_before_marker(&mut listener), vec![("jq_mail".to_owned(), String::new())]);
}

#[test]
fn preloaded_notify_can_be_turned_off_per_queue() {
    notify_switch(&Cluster::start_with(&[PRELOAD]));
}

fn notify_switch(cluster: &Cluster) {
    let mut admin = cluster.connect();
    admin.batch_execute("INSERT INTO jq_queues (queue_name, notify) VALUES ('quiet', false)").unwrap();
    let mut listener = cluster.connect();
    listener.batch_execute(r#"LISTEN "jq_quiet"; LISTEN "jq_loud"; LISTEN marker"#).unwrap();

    // A new session reads the setting on its first enqueue into the queue.
    let mut producer = cluster.connect();
    producer.batch_execute("SELECT jq_enqueue('quiet', '{}'); SELECT jq_enqueue('loud', '{}'); NOTIFY marker").unwrap();
    assert_eq!(notifications_before_marker(&mut listener), vec![("jq_loud".to_owned(), String::new())]);

    admin.batch_execute("UPDATE jq_queues SET notify = true WHERE queue_name = 'quiet'").unwrap();
    let mut producer = cluster.connect();
    producer.batch_execute("SELECT jq_enqueue('quiet', '{}'); NOTIFY marker").unwrap();
    assert_eq!(notifications_before_marker(&mut listener), vec![("jq_quiet".to_owned(), String::new())]);
}

/// Preloaded, the library counts listeners per channel. Every way a session stops listening must
/// leave the count right, or a later listener would miss its notifications.
#[test]
fn listeners_come_and_go_and_the_next_one_is_still_notified() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut producer = cluster.connect();
    let mut marker_only = cluster.connect();
    marker_only.batch_execute("LISTEN marker").unwrap();
    let notified = |producer: &mut Client, listener: &mut Client| {
        producer.batch_execute("SELECT jq_enqueue('come', '{}'); NOTIFY marker").unwrap();
        notifications_before_marker(listener)
    };
    let expected = vec![("jq_come".to_owned(), String::new())];

    // A listener that disconnects, then a new one.
    {
        let mut first = cluster.connect();
        first.batch_execute(r#"LISTEN "jq_come"; LISTEN marker"#).unwrap();
        assert_eq!(notified(&mut producer, &mut first), expected);
    }
    let mut listener = cluster.connect();
    listener.batch_execute(r#"LISTEN marker; LISTEN "jq_come"; LISTEN "jq_come""#).unwrap();
    assert_eq!(notified(&mut producer, &mut listener), expected);
    // UNLISTEN rolled back: still listening.
    listener.batch_execute(r#"BEGIN; UNLISTEN "jq_come"; ROLLBACK"#).unwrap();
    assert_eq!(notified(&mut producer, &mut listener), expected);
    // UNLISTEN in a savepoint rolled back, or in a PL/pgSQL block whose exception undid it: the
    // transaction commits, but PostgreSQL keeps the session listening, and so must the count.
    listener.batch_execute(r#"BEGIN; SAVEPOINT s; UNLISTEN "jq_come"; ROLLBACK TO s; COMMIT"#).unwrap();
    assert_eq!(notified(&mut producer, &mut listener), expected, "after a rolled-back savepoint");
    listener
        .batch_execute(
            r#"DO $$ BEGIN BEGIN UNLISTEN "jq_come"; RAISE EXCEPTION 'undo';
               EXCEPTION WHEN raise_exception THEN NULL; END; END $$"#,
        )
        .unwrap();
    assert_eq!(notified(&mut producer, &mut listener), expected, "after an exception block");
    // UNLISTEN, then LISTEN again; UNLISTEN *, then again; DISCARD ALL, then again.
    for stop in [r#"UNLISTEN "jq_come""#, "UNLISTEN *", "DISCARD ALL"] {
        listener.batch_execute(stop).unwrap();
        listener.batch_execute("LISTEN marker").unwrap();
        assert_eq!(notified(&mut producer, &mut listener), vec![], "{stop}");
        listener.batch_execute(r#"LISTEN "jq_come""#).unwrap();
        assert_eq!(notified(&mut producer, &mut listener), expected, "after {stop}");
    }
    drop(marker_only);
}

/// A session that runs one waiting claim on a thread; the result is its claimed job ids. Its
/// statement_timeout (100 s) is shorter than the four-minute waits the tests use, so a wake-up
/// that never comes fails the test (57014) rather than letting the wait's end claim the job.
fn waiting_claim(
    cluster: &Cluster,
    queue: &'static str,
    wait: &'static str,
) -> thread::JoinHandle<Result<Vec<i64>, postgres::Error>> {
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SET application_name = 'waiter'; SET pg_jobqueue.wait_recheck = '1h'; SET statement_timeout = '100s'",
        )
        .unwrap();
    thread::spawn(move || {
        let rows =
            client.query("SELECT id FROM jq_claim($1, 'waiter', wait => $2::text::interval)", &[&queue, &wait])?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    })
}

/// Waits until the waiting claim sleeps, and returns what pg_stat_activity shows of its horizon:
/// (backend_xmin IS NULL, backend_xid IS NULL).
fn sleeping_waiter(client: &mut Client) -> (bool, bool) {
    let mut horizon = (false, false);
    wait_until("the waiting claim sleeps", || {
        let row = client
            .query_opt(
                "SELECT backend_xmin IS NULL, backend_xid IS NULL FROM pg_stat_activity
                 WHERE application_name = 'waiter' AND wait_event_type = 'Extension'",
                &[],
            )
            .unwrap();
        row.map(|r| horizon = (r.get(0), r.get(1))).is_some()
    });
    horizon
}

#[test]
fn a_waiting_claim_is_woken_by_a_commit_holding_no_snapshot_while_it_sleeps() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut producer = cluster.connect();
    let waiter = waiting_claim(&cluster, "w", "4 min");
    assert_eq!(sleeping_waiter(&mut producer), (true, true), "the sleeping claim holds back VACUUM");

    // An enqueue that rolls back leaves nothing to claim: the claim sleeps on. (Whether it was
    // woken for nothing cannot be seen from here; the NOTIFY tests check rollbacks send nothing.)
    producer.batch_execute("BEGIN; SELECT jq_enqueue('w', '{}'); ROLLBACK").unwrap();
    sleeping_waiter(&mut producer);
    assert!(!waiter.is_finished());

    let committed = Instant::now();
    let id: i64 = producer.query_one("SELECT jq_enqueue('w', '{}')", &[]).unwrap().get(0);
    let claimed = waiter.join().unwrap().unwrap();
    eprintln!("woken {:?} after the enqueue committed", committed.elapsed());
    // With an hour between rechecks, only the wake-up could end the four-minute wait.
    assert_eq!(claimed, vec![id]);
}

/// An enqueue whose savepoint rolls back wakes nobody, though its transaction commits; one whose
/// savepoint is released does. To make a wake-up visible, a job is made due behind the waiter's
/// back (an UPDATE wakes nobody): a woken waiter would claim it at once. The waiter is watched for
/// two seconds after the rolled-back enqueue: long enough for any wake-up to show, and only a
/// wake-up that should not have come can fail the test.
#[test]
fn an_enqueue_in_a_rolled_back_savepoint_wakes_no_waiting_claim() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut producer = cluster.connect();
    let due: i64 = producer
        .query_one("SELECT jq_enqueue('sub', '{}', run_at => clock_timestamp() + interval '1 hour')", &[])
        .unwrap()
        .get(0);
    let waiter = waiting_claim(&cluster, "sub", "4 min");
    sleeping_waiter(&mut producer);
    producer.batch_execute("UPDATE jq_live_jobs SET available_at = now() WHERE id IN (SELECT id FROM jq_jobs WHERE queue_name = 'sub')").unwrap();

    producer.batch_execute("BEGIN; SAVEPOINT s; SELECT jq_enqueue('sub', '{}'); ROLLBACK TO s; COMMIT").unwrap();
    producer
        .batch_execute(
            "DO $$ BEGIN BEGIN PERFORM jq_enqueue('sub', '{}'); RAISE EXCEPTION 'undo';
             EXCEPTION WHEN raise_exception THEN NULL; END; END $$",
        )
        .unwrap();
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(2) {
        assert!(!waiter.is_finished(), "a rolled-back enqueue woke the waiting claim");
        thread::sleep(Duration::from_millis(20));
    }
    sleeping_waiter(&mut producer);

    producer.batch_execute("BEGIN; SAVEPOINT s; SELECT jq_enqueue('sub', '{}'); RELEASE s; COMMIT").unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), vec![due], "a released savepoint's enqueue did not wake it");
}

#[test]
fn a_waiting_claim_returns_no_rows_when_its_wait_ends() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut client = cluster.connect();
    let started = Instant::now();
    let rows = client.query("SELECT id FROM jq_claim('empty', 'w', wait => interval '500 ms')", &[]).unwrap();
    assert!(rows.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(500), "it returned before its wait was over");
}

#[test]
fn statement_timeout_and_cancellation_end_a_waiting_claim() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut client = cluster.connect();
    client.batch_execute("SET statement_timeout = '300ms'").unwrap();
    let error = client.query("SELECT id FROM jq_claim('q', 'w', wait => interval '4 min')", &[]).unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::QUERY_CANCELED), "{error}");

    let waiter = waiting_claim(&cluster, "q", "4 min");
    let mut admin = cluster.connect();
    sleeping_waiter(&mut admin);
    admin
        .batch_execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'waiter'")
        .unwrap();
    let error = waiter.join().unwrap().unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::QUERY_CANCELED), "{error}");
}

#[test]
fn a_waiting_claim_takes_a_job_when_its_run_at_comes() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut producer = cluster.connect();
    let id: i64 = producer
        .query_one("SELECT jq_enqueue('later', '{}', run_at => clock_timestamp() + interval '1 s')", &[])
        .unwrap()
        .get(0);
    // No enqueue wakes it: it must wake itself when the job falls due (rechecks are an hour apart).
    let claimed = waiting_claim(&cluster, "later", "4 min").join().unwrap().unwrap();
    assert_eq!(claimed, vec![id]);
    let on_time: bool =
        producer.query_one("SELECT claimed_at >= available_at FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get(0);
    assert!(on_time, "claimed before its run_at");
}

#[test]
fn without_preload_a_waiting_claim_polls() {
    let cluster = Cluster::start();
    let mut producer = cluster.connect();
    let waiter = waiting_claim(&cluster, "p", "4 min");
    sleeping_waiter(&mut producer);
    let id: i64 = producer.query_one("SELECT jq_enqueue('p', '{}')", &[]).unwrap().get(0);
    assert_eq!(waiter.join().unwrap().unwrap(), vec![id]);
}

#[test]
fn a_waiting_claim_of_a_full_limited_queue_sleeps_without_its_lock() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut admin = cluster.connect();
    admin.batch_execute("INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('one', 1)").unwrap();
    admin.batch_execute("SELECT jq_enqueue('one', '{}'); SELECT jq_enqueue('one', '{}')").unwrap();
    let row = admin.query_one("SELECT id, lease_token FROM jq_claim('one', 'busy')", &[]).unwrap();
    let (running, token): (i64, i64) = (row.get(0), row.get(1));

    let mut waiter_client = cluster.connect();
    waiter_client.batch_execute("SET application_name = 'waiter'").unwrap();
    let waiter = thread::spawn(move || {
        let rows =
            waiter_client.query("SELECT id FROM jq_claim('one', 'waiter', wait => interval '4 min')", &[]).unwrap();
        rows.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>()
    });
    assert_eq!(sleeping_waiter(&mut admin), (true, true), "the sleeping claim holds an id or a snapshot");
    // Other claimers of the queue are not blocked by the sleeping one.
    let mut other = cluster.connect();
    other.batch_execute("SET lock_timeout = '5s'").unwrap();
    assert!(other.query("SELECT id FROM jq_claim('one', 'other')", &[]).unwrap().is_empty());

    // The freed slot is found by the recheck (default: a second).
    assert!(admin.query_one("SELECT jq_complete($1, 'busy', $2)", &[&running, &token]).unwrap().get::<_, bool>(0));
    let claimed = waiter.join().unwrap();
    assert_eq!(claimed.len(), 1);
    assert_ne!(claimed[0], running);
}

/// A waiting claim held back by a key's limit sleeps without the key's lock, and the completion
/// that frees the key's slot wakes it: with an hour between rechecks, nothing else could.
#[test]
fn a_waiting_claim_held_back_by_a_key_limit_wakes_when_the_slot_frees() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT jq_configure('keys', '{\"key_concurrency_limit\": 1}');
             SELECT jq_enqueue_batch('keys', array_fill('{}'::jsonb, ARRAY[2]), concurrency_key => 'a')",
        )
        .unwrap();
    let row = admin.query_one("SELECT id, lease_token FROM jq_claim('keys', 'busy')", &[]).unwrap();
    let (running, token): (i64, i64) = (row.get(0), row.get(1));
    let waiter = waiting_claim(&cluster, "keys", "4 min");
    assert_eq!(sleeping_waiter(&mut admin), (true, true), "the sleeping claim holds an id or a snapshot");
    let locks: i64 = admin
        .query_one("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 27249", &[])
        .unwrap()
        .get(0);
    assert_eq!(locks, 0, "the sleeping claim holds a key's lock");
    assert!(admin.query_one("SELECT jq_complete($1, 'busy', $2)", &[&running, &token]).unwrap().get::<_, bool>(0));
    let claimed = waiter.join().unwrap().unwrap();
    assert_eq!(claimed.len(), 1);
    assert_ne!(claimed[0], running);
}

/// A waiting claim held back by its queue's rate wakes when the next window opens (windows of two
/// seconds here), with an hour between rechecks.
#[test]
fn a_waiting_claim_held_back_by_a_rate_wakes_when_the_window_opens() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut admin = cluster.connect();
    admin
        .batch_execute(
            "SELECT jq_configure('rated', '{\"rate_limit\": 1, \"rate_period\": \"2 seconds\"}');
             SELECT jq_enqueue_batch('rated', array_fill('{}'::jsonb, ARRAY[2]))",
        )
        .unwrap();
    let first: i64 = admin.query_one("SELECT id FROM jq_claim('rated', 'w')", &[]).unwrap().get(0);
    let waiter = waiting_claim(&cluster, "rated", "4 min");
    let claimed = waiter.join().unwrap().unwrap();
    assert_eq!(claimed.len(), 1);
    assert_ne!(claimed[0], first);
    // The second claim came in a later window than the first's.
    let later: bool = admin
        .query_one(
            "SELECT c.claimed_at >= f.claimed_at - mod(extract(epoch FROM f.claimed_at), 2) * interval '1 s' + interval '2 s'
             FROM jq_jobs c, jq_jobs f WHERE c.id = $1 AND f.id = $2",
            &[&claimed[0], &first],
        )
        .unwrap()
        .get(0);
    assert!(later, "claimed within the window the first claim used up");
}

#[test]
fn a_waiting_claim_needs_read_committed() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let mut tx = client.build_transaction().isolation_level(postgres::IsolationLevel::RepeatableRead).start().unwrap();
    let error = tx.query("SELECT id FROM jq_claim('q', 'w', wait => interval '1 s')", &[]).unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::FEATURE_NOT_SUPPORTED), "{error}");
}

#[test]
fn with_every_listener_gone_polling_drains_the_queue() {
    let cluster = Cluster::start();
    {
        let mut listener = cluster.connect();
        listener.batch_execute(r#"LISTEN "jq_drain""#).unwrap();
    }
    let mut producer = cluster.connect();
    producer.batch_execute("SELECT jq_enqueue_batch('drain', array_fill('{}'::jsonb, ARRAY[300]))").unwrap();
    let workers: Vec<_> = (0..3)
        .map(|w| {
            let mut client = cluster.connect();
            thread::spawn(move || {
                let worker = format!("poller-{w}");
                let mut done = 0;
                loop {
                    let Some(row) =
                        client.query_opt("SELECT id, lease_token FROM jq_claim('drain', $1)", &[&worker]).unwrap()
                    else {
                        return done;
                    };
                    let (id, token): (i64, i64) = (row.get(0), row.get(1));
                    assert!(client
                        .query_one("SELECT jq_complete($1, $2, $3)", &[&id, &worker, &token])
                        .unwrap()
                        .get::<_, bool>(0));
                    done += 1;
                }
            })
        })
        .collect();
    let done: i32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    assert_eq!(done, 300);
    let left: i64 = producer.query_one("SELECT count(*) FROM jq_jobs WHERE status <> 'succeeded'", &[]).unwrap().get(0);
    assert_eq!(left, 0);
}

#[test]
fn a_waiting_claim_that_recovered_leases_inline_returns_to_commit_them() {
    // No preload, so no background reaper: claims recover expired leases of their queue inline.
    let cluster = Cluster::start();
    let mut admin = cluster.connect();
    // A long backoff: the recovered job is pending but not due, so the waiting claim cannot take it.
    admin.batch_execute("INSERT INTO jq_queues (queue_name, backoff_base) VALUES ('r', '1 hour')").unwrap();
    let id: i64 = admin.query_one("SELECT jq_enqueue('r', '{}')", &[]).unwrap().get(0);
    admin.batch_execute("SELECT count(*) FROM jq_claim('r', 'crashed', interval '200 ms')").unwrap();
    thread::sleep(Duration::from_millis(300));

    let mut waiter = cluster.connect();
    // Were it to sleep holding the recovered row, the timeout would cancel it and undo the recovery.
    waiter.batch_execute("SET statement_timeout = '60s'").unwrap();
    let rows = waiter.query("SELECT id FROM jq_claim('r', 'w', wait => interval '4 min')", &[]).unwrap();
    assert!(rows.is_empty());
    let status: String = admin.query_one("SELECT status::text FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get(0);
    assert_eq!(status, "pending", "the recovery was not committed");
}

/// A waiting claim inside a PL/pgSQL loop over a query: the loop's cursor reads with an older
/// snapshot than the claim's looks, so the claim keeps the backend's horizon while it sleeps. Had it
/// cleared it, the concurrent DELETE and VACUUM below would remove rows the loop has yet to read.
#[test]
fn a_waiting_claim_inside_a_plpgsql_loop_keeps_the_loops_rows() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut other = cluster.connect();
    other
        .batch_execute(
            "CREATE TABLE rows_to_read (n int); INSERT INTO rows_to_read SELECT generate_series(1, 2000);
             CREATE FUNCTION read_all_waiting_once() RETURNS int LANGUAGE plpgsql AS $f$
             DECLARE seen int := 0; r record;
             BEGIN
                 FOR r IN SELECT n FROM rows_to_read LOOP
                     seen := seen + 1;
                     IF seen = 1 THEN PERFORM * FROM jq_claim('nothing', 'waiter', wait => '3 s'); END IF;
                 END LOOP;
                 RETURN seen;
             END $f$;",
        )
        .unwrap();
    let mut client = cluster.connect();
    client.batch_execute("SET application_name = 'waiter'").unwrap();
    let reader =
        thread::spawn(move || client.query_one("SELECT read_all_waiting_once()", &[]).map(|r| r.get::<_, i32>(0)));
    let (xmin_released, _) = sleeping_waiter(&mut other);
    assert!(!xmin_released, "the claim released a horizon its caller's cursor still needs");
    other.batch_execute("DELETE FROM rows_to_read").unwrap();
    other.batch_execute("VACUUM rows_to_read").unwrap();
    assert_eq!(reader.join().unwrap().unwrap(), 2000, "the loop lost rows");
}

/// A statement that calls a function on each row a waiting claim returns (here a STABLE one that
/// counts a table's rows with the statement's snapshot) reads after the sleep, so the claim keeps
/// the backend's horizon while it sleeps: the rows deleted and vacuumed meanwhile are still there
/// for it to count. A plain `SELECT id FROM jq_claim(...)`, and jq-worker's claim, which computes
/// with built-in functions, still sleep without one.
#[test]
fn a_waiting_claim_keeps_the_rows_a_function_of_its_statement_reads_afterwards() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut other = cluster.connect();
    other
        .batch_execute(
            "CREATE TABLE rows_to_count (n int); INSERT INTO rows_to_count SELECT generate_series(1, 2000);
             CREATE FUNCTION count_rows() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT count(*) FROM rows_to_count';",
        )
        .unwrap();
    let mut client = cluster.connect();
    client.batch_execute("SET application_name = 'waiter'").unwrap();
    let reader = thread::spawn(move || {
        client
            .query_one("SELECT c.id, count_rows() FROM jq_claim('counted', 'waiter', wait => '60 s') c", &[])
            .map(|r| r.get::<_, i64>(1))
    });
    let (xmin_released, _) = sleeping_waiter(&mut other);
    assert!(!xmin_released, "the claim released a horizon its statement still reads with");
    other.batch_execute("DELETE FROM rows_to_count").unwrap();
    other.batch_execute("VACUUM rows_to_count").unwrap();
    other.query_one("SELECT jq_enqueue('counted', '{}')", &[]).unwrap();
    assert_eq!(reader.join().unwrap().unwrap(), 2000, "the statement's function lost rows");
    // The plain form still lets VACUUM work while it sleeps, and so does jq-worker's, which
    // computes with built-in functions.
    let waiter = waiting_claim(&cluster, "plain", "60 s");
    assert_eq!(sleeping_waiter(&mut other), (true, true), "SELECT id FROM jq_claim(...) holds a horizon");
    other.query_one("SELECT jq_enqueue('plain', '{}')", &[]).unwrap();
    assert_eq!(waiter.join().unwrap().unwrap().len(), 1);
    let mut client = cluster.connect();
    client.batch_execute("SET application_name = 'waiter'").unwrap();
    let worker_like = thread::spawn(move || {
        client
            .query(
                "SELECT id, payload::text, extract(epoch FROM lease_expires_at - clock_timestamp())::float8
                 FROM jq_claim('computed', 'waiter', make_interval(secs => 30), 1, wait => make_interval(secs => 60))",
                &[],
            )
            .map(|rows| rows.len())
    });
    assert_eq!(sleeping_waiter(&mut other), (true, true), "jq-worker's claim holds a horizon");
    other.query_one("SELECT jq_enqueue('computed', '{}')", &[]).unwrap();
    assert_eq!(worker_like.join().unwrap().unwrap(), 1);
}

/// A waiting claim and jq_await beside a held cursor, rechecking every 10 ms for three seconds:
/// some 300 sleeps each. Had either looked at the portal table before each sleep as PostgreSQL 15's
/// `ThereAreNoReadyPortals` does, every sleep would leave a scan of it open: a warning at commit for
/// a few, and after a hundred an error that the abort repeats until the server restarts.
#[test]
fn a_waiting_claim_beside_a_held_cursor_leaves_no_scan_open() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut client = cluster.connect();
    let id: i64 = client.query_one("SELECT jq_enqueue('elsewhere', '{}')", &[]).unwrap().get(0);
    client
        .batch_execute(
            "DECLARE held CURSOR WITH HOLD FOR SELECT 1;
             SET pg_jobqueue.wait_recheck = 10;
             SELECT * FROM jq_claim('emptyq', 'w', wait => '3 s');",
        )
        .expect("the waiting claim ends normally");
    client.query("SELECT * FROM jq_await($1, '3 s')", &[&id]).expect("jq_await ends normally");
    assert_eq!(client.query_one("FETCH held", &[]).unwrap().get::<_, i32>(0), 1, "the cursor is intact");
    let log = cluster.log();
    assert!(!log.contains("hash_seq_search"), "a scan was left open:\n{log}");
    assert!(!log.contains("PANIC"), "the server restarted:\n{log}");
}

/// A waiting claim of 200 s inside a PL/pgSQL loop (whose cursor is a ready portal while the loop
/// body runs) sleeps some 200 times, twice the number of open scans that used to end the backend,
/// and its server, in a PANIC.
#[test]
fn a_200_second_wait_inside_a_plpgsql_loop_ends_normally() {
    let cluster = Cluster::start_with(&[PRELOAD]);
    let mut client = cluster.connect();
    client
        .batch_execute(
            "DO $d$ DECLARE r record; BEGIN
                 FOR r IN SELECT 1 LOOP PERFORM * FROM jq_claim('emptyq', 'w', wait => '200 s'); END LOOP;
             END $d$",
        )
        .unwrap_or_else(|e| panic!("the loop failed: {e}\n{}", cluster.log()));
    let log = cluster.log();
    assert!(!log.contains("hash_seq_search") && !log.contains("PANIC"), "{log}");
}
