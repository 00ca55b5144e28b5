//! pg_upgrade from PostgreSQL 15 to 18 keeps a queue as it was (guide, "Install"): its jobs, the
//! leases held and their fencing tokens, its history and its id sequence. On 18 a lease held before
//! the upgrade completes, a report with a token taken over before it is refused, and a job claimed
//! again gets a higher token than any it had on 15. Needs the library installed for both versions (`make
//! install` and `make install PG=18`); `scripts/test.sh pg_upgrade` runs it.

use std::path::Path;

use jq_harness::{as_postgres, pg_dir_of, text_rows, Client, Cluster};

const PRELOAD: &str = "shared_preload_libraries = 'pg_jobqueue'";

/// What guide "Upgrading PostgreSQL" has a DBA run in each database before pg_upgrade from 15.20.
const DROP_ATTVER: &str = "UPDATE pg_catalog.pg_attribute
     SET attoptions = nullif(ARRAY(SELECT o FROM unnest(attoptions) AS o WHERE o NOT LIKE 'pg_attver=%'), '{}')
     WHERE attoptions::text LIKE '%pg_attver=%' AND attrelid >= 16384";

fn claim(client: &mut Client, queue: &str, worker: &str) -> (i64, i64) {
    let row = client
        .query_one("SELECT id, lease_token FROM jq_claim($1, $2, lease => interval '1 hour')", &[&queue, &worker])
        .expect("a job to claim");
    (row.get(0), row.get(1))
}

fn complete(client: &mut Client, id: i64, worker: &str, token: i64) -> bool {
    client.query_one("SELECT jq_complete($1, $2, $3)", &[&id, &worker, &token]).unwrap().get(0)
}

/// Every job as a line: id, status, owner, token, attempts and lease expiry.
fn jobs(client: &mut Client) -> Vec<String> {
    text_rows(
        client,
        "SELECT format('%s %s %s %s %s %s', id, status, lease_owner, lease_token, attempt_count, lease_expires_at)
         FROM jq_jobs ORDER BY id",
    )
}

fn one(client: &mut Client, sql: &str) -> i64 {
    client.query_one(sql, &[]).unwrap().get(0)
}

/// The last lines of every log pg_upgrade left under `dir`, to say why it failed.
fn logs_end(dir: &Path) -> String {
    let mut said = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            said.push_str(&logs_end(&path));
        } else if path.extension().is_some_and(|e| e == "log") {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let errors: Vec<&str> =
                lines.iter().copied().filter(|l| l.contains("ERROR") || l.contains("FATAL")).collect();
            let end = lines[lines.len().saturating_sub(15)..].join("\n");
            said.push_str(&format!("== {}\n{}\n...\n{end}\n", path.display(), errors.join("\n")));
        }
    }
    said
}

#[test]
fn pg_upgrade_from_15_to_18_keeps_jobs_leases_and_tokens() {
    for version in ["15", "18"] {
        let library = pg_dir_of(version).join("lib/pg_jobqueue.so");
        assert!(library.exists(), "{} is missing: make install PG={version}", library.display());
    }
    let old = Cluster::start_on("15", &[PRELOAD]);
    let mut client = old.connect();
    client
        .batch_execute(
            "CREATE EXTENSION pg_jobqueue;
             SELECT jq_prune();
             SELECT jq_enqueue_batch('up', array_fill('{\"n\": 1}'::jsonb, ARRAY[3]));
             INSERT INTO jq_queues (queue_name, backoff_base, backoff_cap) VALUES ('over', '1 ms', '1 ms');
             SELECT jq_enqueue('over', '{}');",
        )
        .unwrap();
    // A lease that outlives the upgrade.
    let (held, held_token) = claim(&mut client, "up", "w1");
    // A lease taken over: w2's expires, the reaper hands the job back (after a backoff of 1 ms), w3
    // claims it again.
    let (taken, stale_token) = claim(&mut client, "over", "w2");
    client
        .execute("UPDATE jq_live_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", &[&taken])
        .unwrap();
    client.batch_execute("SELECT jq_reap(); SELECT pg_sleep(0.01);").unwrap();
    let (again, fresh_token) = claim(&mut client, "over", "w3");
    assert_eq!((again, fresh_token > stale_token), (taken, true));
    // A job finished into the history; the third of 'up' stays pending.
    let (done, done_token) = claim(&mut client, "up", "w4");
    assert!(complete(&mut client, done, "w4", done_token));
    let before = jobs(&mut client);
    let highest_id = one(&mut client, "SELECT max(id) FROM jq_jobs");
    // PostgreSQL 15.20 (Debian's 15.20-0+deb12u1, this machine's) stamps every column of every
    // table with an option `pg_attver`, which 18.6 does not know: pg_upgrade's restore of any table
    // fails on it ("unrecognized parameter"), with or without pg_jobqueue. Until 18 knows it, the
    // option goes before the upgrade (guide, "Upgrading PostgreSQL").
    client.batch_execute(DROP_ATTVER).unwrap();
    drop(client);
    old.halt();

    // 18 makes clusters with data checksums; pg_upgrade needs the old cluster's setting (none).
    let new = Cluster::init_on("18", &[PRELOAD], &["--no-data-checksums"]);
    let bin = |version: &str| pg_dir_of(version).join("bin");
    let upgraded = as_postgres("18", "pg_upgrade")
        .current_dir(std::env::temp_dir())
        .arg("-b")
        .arg(bin("15"))
        .arg("-B")
        .arg(bin("18"))
        .arg("-d")
        .arg(old.data_dir())
        .arg("-D")
        .arg(new.data_dir())
        .args(["-U", "postgres", "-p", &old.port().to_string(), "-P", &new.port().to_string()])
        .output()
        .expect("pg_upgrade runs");
    let said = String::from_utf8_lossy(&upgraded.stdout);
    assert!(
        upgraded.status.success(),
        "pg_upgrade failed:\n{said}{}\n{}",
        String::from_utf8_lossy(&upgraded.stderr),
        logs_end(&new.data_dir().join("pg_upgrade_output.d"))
    );
    assert!(said.contains("Upgrade Complete"), "{said}");

    new.start_again();
    let mut client = new.connect();
    assert_eq!(one(&mut client, "SELECT current_setting('server_version_num')::bigint / 10000"), 18);
    assert_eq!(jobs(&mut client), before, "the jobs as they were on 15");
    let beat: bool = client.query_one("SELECT jq_heartbeat($1, 'w1', $2)", &[&held, &held_token]).unwrap().get(0);
    assert!(beat, "a lease held across the upgrade heartbeats");
    assert!(complete(&mut client, held, "w1", held_token), "a lease held across the upgrade completes");
    assert!(!complete(&mut client, taken, "w2", stale_token), "a token taken over before the upgrade is refused");
    // Tokens go on rising: w3's lease expires in turn, and the next claim of the job gets a higher
    // token than any it had on 15.
    client
        .execute("UPDATE jq_live_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", &[&taken])
        .unwrap();
    client.batch_execute("SELECT jq_reap(); SELECT pg_sleep(0.01);").unwrap();
    let (again, newest_token) = claim(&mut client, "over", "w6");
    assert_eq!((again, newest_token > fresh_token), (taken, true), "the token rises across the upgrade");
    assert!(!complete(&mut client, taken, "w3", fresh_token));
    assert!(complete(&mut client, taken, "w6", newest_token));
    let (last, last_token) = claim(&mut client, "up", "w5");
    assert!(complete(&mut client, last, "w5", last_token));
    let id = one(&mut client, "SELECT jq_enqueue('up', '{}')");
    assert!(id > highest_id, "ids go on from the sequence");
    assert_eq!(
        text_rows(&mut client, "SELECT status::text || ' ' || count(*) FROM jq_jobs GROUP BY status ORDER BY 1"),
        ["pending 1", "succeeded 4"]
    );
    // The background reaper runs on 18, in the upgraded database.
    jq_harness::wait_until("the reaper serves the upgraded database", || {
        one(&mut client, "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper'") == 1
    });
}
