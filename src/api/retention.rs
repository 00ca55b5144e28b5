//! jq_prune: deleting old history, bounded by `max_jobs` so that a large backlog is worked off in
//! short transactions. The background reaper runs the same `prune` every
//! `pg_jobqueue.prune_interval`.

use pgrx::datum::TimestampWithTimeZone;
use pgrx::prelude::*;
use pgrx::spi;

use crate::db::{self, clock};
use crate::{input, rights};

const PRUNE: &str = include_str!("../../sql/queries/prune.sql");
const PRUNE_CUTOFF: &str = include_str!("../../sql/queries/prune_cutoff.sql");

/// Deletes up to `max_jobs` succeeded or cancelled jobs older than their queue's retention, with
/// their events. Returns how many; call it until it returns less than `max_jobs`. Maintenance of
/// every queue: only those the owner grants EXECUTE may call it.
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_prune(max_jobs: default!(Option<i32>, 10000)) -> spi::Result<i32> {
    let max_jobs = input::max_jobs(max_jobs);
    rights::as_owner(|| prune(max_jobs))
}

/// The body of `jq_prune`, also run by the background worker. The cutoff is read read-only, so a
/// prune that finds nothing to delete takes no transaction id.
pub fn prune(max_jobs: i32) -> spi::Result<i32> {
    let now = clock::now();
    let cutoff = db::read_only_rows::<(Option<TimestampWithTimeZone>,)>(PRUNE_CUTOFF, &[now.into()])?
        .pop()
        .and_then(|(cutoff,)| cutoff);
    db::count_planned_per_call(PRUNE, &[max_jobs.into(), now.into(), cutoff.into()])
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    #[pg_test]
    fn prune_deletes_finished_jobs_past_their_queues_retention() {
        run("INSERT INTO jq_queues (queue_name, retention) VALUES ('short', '1 hour'), ('forever', NULL)");
        for queue in ["short", "forever", "default"] {
            run(&format!("SELECT jq_enqueue_batch('{queue}', array_fill('{{}}'::jsonb, ARRAY[2]))"));
            for _ in 0..2 {
                let (id, token) = claim(queue, "w", "30 s").unwrap();
                assert!(complete(id, "w", token));
            }
        }
        make_dead("short", 1, "E");
        // Age the history: one job of each queue finished 2 hours ago, the other 8 days ago.
        run("UPDATE jq_jobs SET finished_at = clock_timestamp() - interval '2 hours' WHERE status = 'succeeded' AND id % 2 = 0");
        run("UPDATE jq_jobs SET finished_at = clock_timestamp() - interval '8 days' WHERE status IN ('succeeded', 'dead') AND id % 2 = 1");
        run("UPDATE jq_jobs SET finished_at = clock_timestamp() - interval '8 days' WHERE status = 'dead'");
        assert_eq!(one::<i32>("SELECT jq_prune(max_jobs => 1)"), 1);
        assert_eq!(one::<i32>("SELECT jq_prune()"), 2);
        assert_eq!(one::<i32>("SELECT jq_prune()"), 0);
        assert!(one::<bool>(
            "SELECT count(*) FILTER (WHERE queue_name = 'short' AND status = 'succeeded') = 0
                AND count(*) FILTER (WHERE queue_name = 'forever') = 2
                AND count(*) FILTER (WHERE queue_name = 'default') = 1
                AND count(*) FILTER (WHERE status = 'dead') = 1
             FROM jq_jobs"
        ));
    }

    /// `jq_prune` is maintenance that runs every minute: finding nothing, it must not take a
    /// transaction id (which writes a commit record). Both queries run read-only, so that only the
    /// prune could take one.
    #[pg_test]
    fn a_prune_with_nothing_to_delete_takes_no_transaction_id() {
        let read = |sql: &str| Spi::connect(|c| c.select(sql, None, &[])?.first().get_one::<String>()).unwrap();
        assert_eq!(read("SELECT jq_prune()::text").as_deref(), Some("0"));
        assert_eq!(read("SELECT pg_current_xact_id_if_assigned()::text"), None);
    }
}
