//! jq_list_jobs: a page of one queue's jobs, by status, with the filters an operator narrows a list
//! by (guide, "jq_list_jobs"). It reads the queue's jobs through the partial indexes the claim and
//! the figures already keep, and its succeeded jobs through each day's index by queue: a listing
//! never reads a table or a day of history whole. Its caller needs `manage` on the queue, as for
//! `jq_managed_jobs`, which shows the same rows but, as a security_barrier view, cannot be read
//! through those indexes.

use pgrx::datum::{Interval, TimestampWithTimeZone};
use pgrx::prelude::*;
use pgrx::spi;

use crate::db::{self, clock, status::Status};
use crate::input;
use crate::rights::{self, Privilege};

pub(crate) const LIVE: &str = include_str!("../../sql/queries/list_live.sql");
pub(crate) const SUCCEEDED: &str = include_str!("../../sql/queries/list_succeeded.sql");

const STATUSES: [&str; 5] = ["pending", "running", "succeeded", "dead", "cancelled"];

type Listed = (
    i64,
    Status,
    i32,
    i32,
    i32,
    TimestampWithTimeZone,
    TimestampWithTimeZone,
    Option<TimestampWithTimeZone>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    bool,
);

/// Up to `max_rows` jobs of `queue_name` after `skip_rows`: those of `status`, or with NULL every
/// pending, running, dead and cancelled job; newest first, succeeded jobs latest finished first.
/// `key` matches a concurrency or an ordering key, `error_code` the last error code, and
/// `older_than` keeps jobs created longer ago than that.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_unsafe)]
#[search_path(pg_catalog, @extschema@, pg_temp)]
fn jq_list_jobs(
    queue_name: Option<&str>,
    status: default!(Option<Status>, "NULL"),
    key: default!(Option<&str>, "NULL"),
    error_code: default!(Option<&str>, "NULL"),
    older_than: default!(Option<Interval>, "NULL"),
    max_rows: default!(Option<i32>, 50),
    skip_rows: default!(Option<i32>, 0),
) -> spi::Result<
    TableIterator<
        'static,
        (
            name!(id, i64),
            name!(status, Status),
            name!(priority, i32),
            name!(attempt_count, i32),
            name!(max_attempts, i32),
            name!(created_at, TimestampWithTimeZone),
            name!(available_at, TimestampWithTimeZone),
            name!(finished_at, Option<TimestampWithTimeZone>),
            name!(last_error_code, Option<String>),
            name!(concurrency_key, Option<String>),
            name!(ordering_key, Option<String>),
            name!(lease_owner, Option<String>),
            name!(held, bool),
        ),
    >,
> {
    let queue_name = input::queue_name(queue_name);
    let status = status.map(label);
    let key = input::key("key", key);
    let created_before = input::older_than(older_than, clock::now());
    let (rows, skip) = input::page(max_rows, skip_rows);
    rights::require(queue_name, Privilege::Manage);
    let listed = rights::as_owner(|| {
        let filters = [key.into(), error_code.into(), created_before.into(), rows.into(), skip.into()];
        match status {
            Some("succeeded") => {
                let args: Vec<_> = [queue_name.into()].into_iter().chain(filters).collect();
                db::rows_planned_per_call::<Listed>(SUCCEEDED, &args)
            }
            _ => {
                let args: Vec<_> = [queue_name.into(), status.into()].into_iter().chain(filters).collect();
                db::rows_planned_per_call::<Listed>(LIVE, &args)
            }
        }
    })?;
    Ok(TableIterator::new(listed))
}

/// The label of a `jq_status` value.
fn label(status: Status) -> &'static str {
    STATUSES.into_iter().find(|name| status.is(name)).expect("a jq_status value is one of its labels")
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    /// The ids `jq_list_jobs` returns for these arguments (after the queue name), in its order.
    fn listed(arguments: &str) -> Vec<i64> {
        one::<Vec<i64>>(&format!("SELECT coalesce(array_agg(id), '{{}}') FROM jq_list_jobs({arguments})"))
    }

    /// Runs the one claimable job of `queue`, which must be `id`, to success.
    fn succeed(queue: &str, id: i64) {
        let (claimed, token) = claim(queue, "w", "30 s").unwrap();
        assert_eq!(claimed, id);
        assert!(complete(id, "w", token));
    }

    #[pg_test]
    fn list_jobs_gives_each_status_newest_first_and_the_succeeded_from_the_history() {
        let first_done = enqueue("l");
        succeed("l", first_done);
        let last_done = enqueue("l");
        succeed("l", last_done);
        let dead = make_dead("l", 1, "E_GONE")[0];
        let cancelled = enqueue("l");
        assert!(one::<bool>(&format!("SELECT jq_cancel({cancelled})")));
        let running = enqueue("l");
        let (claimed, _) = claim("l", "w", "30 s").unwrap();
        assert_eq!(claimed, running);
        let keyed = one::<i64>("SELECT jq_enqueue('l', '{}', concurrency_key => 'k1')");
        let ordered = one::<i64>("SELECT jq_enqueue('l', '{}', ordering_key => 'o1')");
        let held = one::<i64>(&format!("SELECT jq_enqueue('l', '{{}}', depends_on => ARRAY[{keyed}])"));
        let pending = enqueue("l");
        enqueue("elsewhere");

        assert_eq!(listed("'l'"), vec![pending, held, ordered, keyed, running, cancelled, dead]);
        assert_eq!(listed("'l', 'pending'"), vec![pending, held, ordered, keyed]);
        assert_eq!(listed("'l', 'running'"), vec![running]);
        assert_eq!(listed("'l', 'dead'"), vec![dead]);
        assert_eq!(listed("'l', 'cancelled'"), vec![cancelled]);
        assert_eq!(listed("'l', 'succeeded'"), vec![last_done, first_done]);
        assert!(one::<bool>(&format!("SELECT held AND status = 'pending' FROM jq_list_jobs('l') WHERE id = {held}")));
        assert!(one::<bool>(&format!(
            "SELECT lease_owner = 'w' AND NOT held FROM jq_list_jobs('l', 'running') WHERE id = {running}"
        )));

        // The filters: a concurrency or an ordering key, the last error code, the age.
        assert_eq!(listed("'l', key => 'k1'"), vec![keyed]);
        assert_eq!(listed("'l', key => 'o1'"), vec![ordered]);
        assert_eq!(listed("'l', error_code => 'E_GONE'"), vec![dead]);
        assert_eq!(listed("'l', older_than => '1 hour'"), Vec::<i64>::new());
        assert_eq!(listed("'l', 'succeeded', older_than => '1 hour'"), Vec::<i64>::new());
        assert_eq!(listed("'l', older_than => '0'").len(), 7);

        // Pages, and queues with nothing to list.
        assert_eq!(listed("'l', max_rows => 3"), vec![pending, held, ordered]);
        assert_eq!(listed("'l', max_rows => 3, skip_rows => 3"), vec![keyed, running, cancelled]);
        assert_eq!(listed("'l', 'succeeded', max_rows => 1, skip_rows => 1"), vec![first_done]);
        assert_eq!(listed("'never-used'"), Vec::<i64>::new());
        assert_eq!(listed("'elsewhere', 'succeeded'"), Vec::<i64>::new());
    }

    #[pg_test(error = "max_rows must be between 1 and 1000")]
    fn list_jobs_refuses_a_page_of_no_rows() {
        listed("'l', max_rows => 0");
    }

    #[pg_test(error = "older_than must not be negative")]
    fn list_jobs_refuses_a_negative_age() {
        listed("'l', older_than => '-1 s'");
    }
}
