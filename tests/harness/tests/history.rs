//! Storage split (guide, "Storage"): a completed job leaves the hot table for the history, which
//! keeps it under the same id, and retention takes whole days of history at once. Each test says
//! what it would have caught.

use std::time::{Duration, Instant};

use jq_harness::client::{claim, complete};
use jq_harness::{text_rows, Client, Cluster};

fn one<T: for<'a> postgres::types::FromSql<'a>>(client: &mut Client, sql: &str) -> T {
    client.query_one(sql, &[]).unwrap().get(0)
}

/// A job's row, as jq_jobs shows it, without the times a completion sets.
fn shown(client: &mut Client, id: i64) -> String {
    one(
        client,
        &format!(
            "SELECT format('%s %s %s %s %s %s %s', id, queue_name, status, attempt_count, lease_token,
                           lease_owner IS NULL AND lease_expires_at IS NULL, last_error_code)
             FROM jq_jobs WHERE id = {id}"
        ),
    )
}

#[test]
fn a_completed_job_moves_to_the_history_and_keeps_its_id_events_and_fencing() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    let id: i64 = one(&mut client, "SELECT jq_enqueue('h', '{\"n\": 1}', max_attempts => 3)");
    let (_, first) = claim(&mut client, "h", "w", "30 s").unwrap();
    client.execute("SELECT jq_fail($1, 'w', $2, 'FLAKY', 'once', retry_in => '0 s')", &[&id, &first]).unwrap();
    let (_, token) = claim(&mut client, "h", "w", "30 s").unwrap();
    assert!(complete(&mut client, id, "w", token));

    let (live, history): (i64, i64) = {
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM jq_live_jobs WHERE id = $1), (SELECT count(*) FROM jq_job_history WHERE id = $1)",
                &[&id],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((live, history), (0, 1), "the job is in the history only");
    assert_eq!(shown(&mut client, id), format!("{id} h succeeded 2 {token} t FLAKY"));
    let payload: String = one(&mut client, &format!("SELECT payload::text FROM jq_jobs WHERE id = {id}"));
    assert_eq!(payload, "{\"n\": 1}");
    let events =
        text_rows(&mut client, &format!("SELECT event || ' ' || error_code FROM jq_job_events WHERE job_id = {id}"));
    assert_eq!(events, ["failed FLAKY"], "the job's events stay with it");

    // Its lease ended with it: nothing acts on a finished job, whichever table holds it.
    assert!(!complete(&mut client, id, "w", token), "a second completion");
    let late: (bool, bool, bool, bool) = {
        let row = client
            .query_one(
                "SELECT jq_heartbeat($1, 'w', $2), jq_fail($1, 'w', $2, 'E'), jq_retry($1), jq_cancel($1)",
                &[&id, &token],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2), row.get(3))
    };
    assert_eq!(late, (false, false, false, false));
    assert_eq!(shown(&mut client, id), format!("{id} h succeeded 2 {token} t FLAKY"));
}

/// A day of history made the way `jq_prune` makes the days ahead, here for a day in the past.
fn make_day(client: &mut Client, days_ago: i32) -> (String, String) {
    let (name, start): (String, String) = {
        let row = client
            .query_one(
                "SELECT 'jq_job_history_' || to_char(d, 'YYYYMMDD'), (d AT TIME ZONE 'UTC')::text
                 FROM (SELECT date_trunc('day', now() AT TIME ZONE 'UTC') - make_interval(days => $1) AS d) s",
                &[&days_ago],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    client
        .batch_execute(&format!(
            "CREATE TABLE {name} (LIKE jq_job_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
             ALTER TABLE jq_job_history ATTACH PARTITION {name}
                 FOR VALUES FROM ('{start}') TO (timestamptz '{start}' + interval '24 hours');"
        ))
        .unwrap();
    (name, start)
}

/// `n` succeeded jobs of `queue` that finished an hour into the day starting at `start`.
fn add_history(client: &mut Client, queue: &str, n: i32, start: &str) {
    client.execute("INSERT INTO jq_queue_ids (queue_name) VALUES ($1) ON CONFLICT DO NOTHING", &[&queue]).unwrap();
    client
        .execute(
            "INSERT INTO jq_job_history (id, queue_id, payload, priority, available_at, attempt_count,
                                         max_attempts, lease_token, created_at, finished_at)
             SELECT nextval('jq_jobs_id_seq'), (SELECT queue_id FROM jq_queue_ids WHERE queue_name = $1), '{}', 0,
                    f, 1, 8, 1, f, f
             FROM (SELECT $2::text::timestamptz + interval '1 hour' AS f) t, generate_series(1, $3)",
            &[&queue, &start, &n],
        )
        .unwrap();
}

fn exists(client: &mut Client, table: &str) -> bool {
    one(client, &format!("SELECT to_regclass('{table}') IS NOT NULL"))
}

/// Deleting rows one by one leaves dead tuples and vacuum work; a whole expired day is truncated and
/// dropped instead. Without the day path, `jq_prune` deletes every row and the count of deleted
/// tuples is the day's size.
#[test]
fn retention_drops_a_whole_expired_day_with_its_events_and_deletes_no_row() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "INSERT INTO jq_queues (queue_name, retention) VALUES ('short', '1 day'), ('long', '30 days'), ('forever', NULL)",
        )
        .unwrap();
    let (expired, start) = make_day(&mut client, 10);
    add_history(&mut client, "short", 20000, &start);
    add_history(&mut client, "plain", 5000, &start); // no settings row: 7 days
    client
        .batch_execute(&format!(
            "INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, lease_token)
             SELECT id, 'short', 'failed', 'pending', finished_at, 1, 1 FROM {expired} LIMIT 3"
        ))
        .unwrap();
    // A day that one queue still keeps: only the other queue's jobs go, one by one.
    let (mixed, start) = make_day(&mut client, 5);
    add_history(&mut client, "short", 7, &start);
    add_history(&mut client, "long", 11, &start);
    let (forever, start) = make_day(&mut client, 20);
    add_history(&mut client, "forever", 13, &start);
    // An expired day of no queue in particular (emptied before) goes too.
    let (empty, _) = make_day(&mut client, 30);

    let pruned: i32 = one(&mut client, "SELECT jq_prune()");
    assert_eq!(pruned, 25007);
    assert!(!exists(&mut client, &expired), "the expired day is dropped");
    assert!(!exists(&mut client, &empty), "the empty expired day is dropped");
    assert!(exists(&mut client, &mixed) && exists(&mut client, &forever), "the days still kept");
    let left = text_rows(
        &mut client,
        "SELECT queue_name || ' ' || count(*) FROM jq_jobs WHERE status = 'succeeded' GROUP BY queue_name ORDER BY 1",
    );
    assert_eq!(left, ["forever 13", "long 11"]);
    let events: i64 = one(&mut client, "SELECT count(*) FROM jq_job_events");
    assert_eq!(events, 0, "the dropped jobs' events went with them");
    client.batch_execute("SELECT pg_stat_force_next_flush()").unwrap();
    let deleted: i64 = one(
        &mut client,
        "SELECT coalesce(sum(n_tup_del), 0)::bigint FROM pg_stat_user_tables WHERE relname LIKE 'jq_job_history%'",
    );
    assert_eq!(deleted, 7, "only the jobs of the mixed day were deleted as rows");
    assert_eq!(one::<i32>(&mut client, "SELECT jq_prune()"), 0);
}

/// Partition DDL waits for its lock at most a moment: a reader holding the history open does not
/// make `jq_prune` (or the reaper's prune pass) hang, and completions go on into the default
/// partition until the day exists.
#[test]
fn a_prune_that_cannot_lock_the_history_gives_up_and_completions_go_on() {
    let cluster = Cluster::start();
    let mut reader = cluster.connect();
    reader.batch_execute("BEGIN; SELECT count(*) FROM jq_jobs;").unwrap();
    let mut client = cluster.connect();
    let started = Instant::now();
    assert_eq!(one::<i32>(&mut client, "SELECT jq_prune()"), 0);
    assert!(started.elapsed() < Duration::from_secs(30), "jq_prune waited {:?}", started.elapsed());
    let days: i64 = one(&mut client, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'jq_job_history'::regclass");
    assert_eq!(days, 1, "only the default partition: the days wait for the lock");
    let id: i64 = one(&mut client, "SELECT jq_enqueue('q', '{}')");
    let (_, token) = claim(&mut client, "q", "w", "30 s").unwrap();
    assert!(complete(&mut client, id, "w", token));
    let in_default: i64 = one(&mut client, "SELECT count(*) FROM jq_job_history_default");
    assert_eq!(in_default, 1);

    reader.batch_execute("COMMIT").unwrap();
    assert_eq!(one::<i32>(&mut client, "SELECT jq_prune()"), 0);
    let days: i64 = one(&mut client, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'jq_job_history'::regclass");
    // Today's day is not made while the default partition holds a job of today; the next two are.
    assert_eq!(days, 3);
    let id: i64 = one(&mut client, "SELECT jq_enqueue('q', '{}')");
    let (_, token) = claim(&mut client, "q", "w", "30 s").unwrap();
    assert!(complete(&mut client, id, "w", token));
    assert_eq!(one::<i64>(&mut client, "SELECT count(*) FROM jq_jobs WHERE status = 'succeeded'"), 2);
}

/// Two sessions making the missing days at once (the background worker's first pass and a
/// claim's just after CREATE EXTENSION, or jq_prune beside either) must not deadlock: each held a
/// lock the other's next statement needed, and one waited `deadlock_timeout` (1 s by default) to
/// be chosen as the victim, a claim meanwhile holding its rows. One makes the days; the other
/// leaves them to it. A short `deadlock_timeout` and `log_lock_waits` make any deadlock show in
/// the server's log.
#[test]
fn two_prunes_making_the_days_at_once_never_deadlock() {
    let cluster = Cluster::start_with(&["deadlock_timeout = '10ms'", "log_lock_waits = on"]);
    let mut client = cluster.connect();
    let days_sql = "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                    WHERE i.inhparent = 'jq_job_history'::regclass AND c.relname <> 'jq_job_history_default'";
    for round in 0..20 {
        for day in text_rows(&mut client, days_sql) {
            client.batch_execute(&format!("DROP TABLE {day}")).unwrap();
        }
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let prunes: Vec<_> = (0..2)
            .map(|_| {
                let (mut session, barrier) = (cluster.connect(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    session
                        .query_one("SELECT jq_prune()", &[])
                        .map(|_| ())
                        .map_err(|e| format!("{:?}", e.as_db_error()))
                })
            })
            .collect();
        for prune in prunes {
            prune.join().unwrap().unwrap_or_else(|e| panic!("round {round}: jq_prune failed: {e}"));
        }
        assert_eq!(text_rows(&mut client, days_sql).len(), 3, "round {round}: today and the next two days");
        let deadlocks: Vec<String> =
            cluster.log().lines().filter(|line| line.contains("deadlock")).map(str::to_owned).collect();
        assert!(deadlocks.is_empty(), "round {round}: the two prunes deadlocked:\n{}", deadlocks.join("\n"));
    }
}

/// `jq_prune` is maintenance that runs every minute: once the coming days exist, a prune that finds
/// nothing to delete must not take a transaction id (which writes a commit record).
#[test]
fn a_prune_with_nothing_to_do_takes_no_transaction_id() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    assert_eq!(one::<i32>(&mut client, "SELECT jq_prune()"), 0);
    let days: Vec<String> = text_rows(
        &mut client,
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
         WHERE i.inhparent = 'jq_job_history'::regclass AND c.relname <> 'jq_job_history_default' ORDER BY 1",
    );
    let expected = text_rows(
        &mut client,
        "SELECT 'jq_job_history_' || to_char(date_trunc('day', now() AT TIME ZONE 'UTC') + d * interval '1 day', 'YYYYMMDD')
         FROM generate_series(0, 2) d ORDER BY 1",
    );
    assert_eq!(days, expected, "today and the next two days (UTC)");
    client.batch_execute("BEGIN").unwrap();
    assert_eq!(one::<i32>(&mut client, "SELECT jq_prune()"), 0);
    let xid: Option<String> = one(&mut client, "SELECT pg_current_xact_id_if_assigned()::text");
    client.batch_execute("COMMIT").unwrap();
    assert_eq!(xid, None);
}

/// A refused report's job, live or finished (src/api/lease.rs, `count_refused`), is found by its id
/// in each day of history, never through its queue's range of the day, which grows all day. Today's
/// day has no statistics while it fills, and the planner's default guesses made a probe by queue
/// look ten times cheaper than one by a list of ids: a refused completion then read every entry of
/// its queue's day. As the extension plans it: a generic plan, sequential scans off.
#[test]
fn a_job_of_the_history_is_found_by_its_id_in_a_day_without_statistics() {
    let cluster = Cluster::start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "SELECT jq_prune();
             SELECT jq_enqueue('h', '{}');
             ANALYZE jq_job_history;
             INSERT INTO jq_job_history (id, queue_id, payload, priority, available_at, attempt_count, max_attempts,
                                         lease_token, created_at, finished_at)
             SELECT nextval('jq_jobs_id_seq'), n.queue_id, '{}', 0, now(), 1, 8, 1, now(), now()
             FROM generate_series(1, 30000) i JOIN jq_queue_ids n ON n.queue_name = 'h';
             SET plan_cache_mode = force_generic_plan;
             SET enable_seqscan = off;",
        )
        .unwrap();
    let today: String = one(&mut client, "SELECT 'jq_job_history_' || to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')");
    assert!(exists(&mut client, &today), "jq_prune made today's day");
    let statement = include_str!("../../../sql/queries/job_queues_any.sql");
    client.batch_execute(&format!("PREPARE find (bigint[]) AS {statement}")).unwrap();
    let plan = text_rows(&mut client, "EXPLAIN EXECUTE find('{0}')");
    assert!(
        plan.iter().any(|line| line.contains(&format!("{today}_id"))),
        "today is probed by id:\n{}",
        plan.join("\n")
    );
    assert!(
        !plan.iter().any(|line| line.contains("_queue ")),
        "a job is looked up through its queue's day:\n{}",
        plan.join("\n")
    );
}
