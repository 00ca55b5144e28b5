//! The plan tests of the statements the functions run, whose plans `db::plans` keeps for the
//! session: each reads its index, and none scans a job table or sorts beyond what it must, on an
//! empty table and on a large one, with the plan made either way.

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    use pgrx::prelude::*;

    use crate::testing::*;

    /// The plan test: with a history of finished jobs and a backlog of pending ones, the claim and the
    /// reaper read their partial indexes, never scan jq_jobs sequentially and never sort; the stats
    /// view and retention do not scan the table either.
    #[pg_test]
    fn claim_and_reap_plans_use_their_partial_indexes() {
        add_history_and_backlog();
        run("SELECT count(*) FROM jq_claim('q1', 'w', interval '1 s', 50)");
        run("ANALYZE jq_live_jobs");

        let now = crate::db::clock::now();
        // As the claim runs it: with a generic plan, prepared once per session (`db::plans`).
        run("SET LOCAL plan_cache_mode = force_generic_plan");
        let queue_id = crate::api::settings::of("q2").unwrap().queue_id.unwrap();
        let claim_plan = |batch: i32, ordered: bool| {
            generic_plan(
                crate::api::claim::statement(false, ordered),
                CLAIM_TYPES,
                &format!(
                    "'q2', 'w', '1 minute', {batch}, now(), {queue_id}, 0, 2147483647, '-infinity', \
                     -9223372036854775808, NULL, '5 minutes'"
                ),
            )
        };
        for (batch, ordered) in [(1, false), (100, false), (1, true), (100, true)] {
            let plan = claim_plan(batch, ordered);
            assert_sorts_only_starving_jobs(&plan);
            assert_reads_index(&plan, "jq_live_jobs_claim");
            assert_has_node(&plan, "Tid Scan");
        }
        // A batch near the size of a small queue may fetch its candidates and sort them, which is
        // cheap there; what must hold at every size is that the UPDATE finds its rows by ctid.
        let plan = claim_plan(1000, true);
        assert_no_seq_scan(&plan);
        assert_has_node(&plan, "Tid Scan");

        // The reaper's passes: expired leases by the running index, and the expiry sweep only
        // through the jobs that have a deadline, soonest first.
        for (sql, index) in [
            (include_str!("../../sql/queries/reap.sql"), "jq_live_jobs_running"),
            (include_str!("../../sql/queries/expire.sql"), "jq_live_jobs_expiring"),
        ] {
            let args = [
                10000i32.into(),
                now.into(),
                Option::<&str>::None.into(),
                Vec::<i64>::new().into(),
                Option::<i64>::None.into(),
            ];
            let plan = Spi::explain_with_args(sql, &args).unwrap();
            assert_no_sort_and_no_seq_scan(&plan.0);
            assert_reads_index(&plan.0, index);
            assert_no_with_read_per_row(&plan.0);
        }

        // Operators' reads and retention grow with live work, not with the succeeded history.
        // The stats view reads the hot table alone, whose size is the live work.
        let stats_plan = Spi::explain("SELECT * FROM jq_queue_stats").unwrap();
        let reads_history = plan_nodes(&stats_plan.0)
            .iter()
            .any(|n| n["Relation Name"].as_str().is_some_and(|r| r.starts_with("jq_job_history")));
        assert!(!reads_history, "the stats view reads the history: {}", stats_plan.0);
        // Retention: the history by queue and age (here all in the default partition, where
        // add_history_and_backlog's rows land), cancelled jobs by their index in the hot table.
        let args = [10000i32.into(), now.into()];
        let history_plan = Spi::explain_with_args(include_str!("../../sql/queries/prune_history.sql"), &args).unwrap();
        assert_no_sort_and_no_seq_scan(&history_plan.0);
        assert_reads_index(&history_plan.0, "jq_job_history_default_queue");
        let cancelled_plan =
            Spi::explain_with_args(include_str!("../../sql/queries/prune_cancelled.sql"), &args).unwrap();
        assert_no_seq_scan(&cancelled_plan.0);
        assert_reads_index(&cancelled_plan.0, "jq_live_jobs_unresolved");
    }

    /// The statements that run with session-long generic plans (this module) keep their access paths in
    /// those plans, whether the plan was made on an empty, never analyzed table (where a sequential
    /// scan is cheapest, and the plan outlives that moment) or on a large one.
    #[pg_test]
    fn generic_plans_use_their_indexes() {
        // What `run` sets while it plans and runs them.
        run("SET LOCAL plan_cache_mode = force_generic_plan");
        run("SET LOCAL enable_seqscan = off");
        assert_generic_plans_use_indexes();
        add_history_and_backlog();
        run("INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('q3', 10)");
        // Statistics taken while nothing ran, then many running jobs: the case where the index of
        // running jobs looks empty to the planner but is not.
        run("ANALYZE jq_live_jobs");
        run("SELECT count(*) FROM jq_claim('q2', 'w', interval '1 hour', 1000)");
        assert_generic_plans_use_indexes();
    }

    /// A listing of one queue's jobs (guide, "jq_list_jobs") reads that queue's entries of the
    /// partial indexes of the statuses asked for, and its succeeded jobs through each day's index by
    /// queue and age, latest first: never a job table or a day of history whole, nor the index on
    /// id, which would walk every queue's jobs to find this one's.
    #[pg_test]
    fn job_listings_read_the_queues_entries_alone() {
        add_history_and_backlog();
        make_dead("q1", 3, "E");
        // And a queue far larger than q1, as most queues are beside the largest.
        run("INSERT INTO jq_queue_ids (queue_name) VALUES ('large')");
        run("INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts, created_at)
             SELECT n.queue_id, '{}', 0, now(), 8, now()
             FROM generate_series(1, 300000) i JOIN jq_queue_ids n ON n.queue_name = 'large'");
        run("ANALYZE jq_live_jobs");
        // As jq_list_jobs plans them: through SPI, which plans no parallel scan. EXPLAIN would.
        run("SET LOCAL max_parallel_workers_per_gather = 0");
        run("ANALYZE jq_job_history_default");
        let none = Option::<&str>::None;
        let since = Option::<pgrx::datum::TimestampWithTimeZone>::None;
        for (status, indexes) in [
            (
                None,
                &[
                    "jq_live_jobs_claim",
                    "jq_live_jobs_key_claim",
                    "jq_live_jobs_held",
                    "jq_live_jobs_running",
                    "jq_live_jobs_unresolved",
                ][..],
            ),
            (Some("pending"), &["jq_live_jobs_claim", "jq_live_jobs_key_claim", "jq_live_jobs_held"][..]),
            (Some("running"), &["jq_live_jobs_running"][..]),
            (Some("dead"), &["jq_live_jobs_unresolved"][..]),
        ] {
            let args = ["q1".into(), status.into(), none.into(), none.into(), since.into(), 50i32.into(), 0i32.into()];
            let plan = Spi::explain_with_args(crate::api::listing::LIVE, &args).unwrap().0;
            assert_no_seq_scan(&plan);
            for index in indexes {
                assert_reads_index(&plan, index);
            }
            let reads = |name: &str| plan_nodes(&plan).iter().any(|n| n["Index Name"] == name);
            assert!(!reads("jq_live_jobs_pkey"), "the listing walks the index on id: {plan}");
            let history = plan_nodes(&plan)
                .iter()
                .any(|n| n["Relation Name"].as_str().is_some_and(|r| r.starts_with("jq_job_history")));
            assert!(!history, "the listing of live jobs reads the history: {plan}");
        }
        let args = ["q1".into(), none.into(), none.into(), since.into(), 50i32.into(), 0i32.into()];
        let plan = Spi::explain_with_args(crate::api::listing::SUCCEEDED, &args).unwrap().0;
        assert_no_sort_and_no_seq_scan(&plan);
        assert_reads_index(&plan, "jq_job_history_default_queue");
    }

    /// The types of a claim statement's arguments, $1 to $12 of claim.sql.
    const CLAIM_TYPES: &str =
        "text, text, interval, int, timestamptz, int, bigint, int, timestamptz, bigint, interval, interval";

    fn assert_generic_plans_use_indexes() {
        for batch in [1, 1000] {
            for front in ["2147483647, '-infinity', -9223372036854775808", "2, now() - interval '1 hour', 5000"] {
                // The lean claim and the whole of claim.sql, whose fairness check alone may sort;
                // each with the ordering-key check and without it.
                for (lean, ordered) in [(true, false), (true, true), (false, false), (false, true)] {
                    let claim = generic_plan(
                        crate::api::claim::statement(lean, ordered),
                        CLAIM_TYPES,
                        &format!("'q1', 'w', '1 minute', {batch}, now(), 1, 0, {front}, NULL, '5 minutes'"),
                    );
                    if lean {
                        assert_no_sort_and_no_seq_scan(&claim);
                    } else {
                        assert_sorts_only_starving_jobs(&claim);
                    }
                    assert_reads_index(&claim, "jq_live_jobs_claim");
                    assert_has_node(&claim, "Tid Scan");
                    assert_front_bounds_the_index_walk(&claim);
                    assert_sized_to_the_queue(&claim, ordered);
                }
            }
            // The lean claim of a queue that has only had jobs of priority 0: one index walk.
            for ordered in [false, true] {
                let claim = generic_plan(
                    crate::api::claim::statement_one_priority(ordered),
                    CLAIM_TYPES,
                    &format!("'q1', 'w', '1 minute', {batch}, now(), 1, 0, 0, now() - interval '1 hour', 5000, NULL, '5 minutes'"),
                );
                assert_no_sort_and_no_seq_scan(&claim);
                assert_reads_index(&claim, "jq_live_jobs_claim");
                assert_has_node(&claim, "Tid Scan");
                assert_front_bounds_the_index_walk(&claim);
                assert_sized_to_the_queue(&claim, ordered);
                let walks = plan_nodes(&claim).iter().filter(|n| n["Index Name"] == "jq_live_jobs_claim").count();
                assert_eq!(walks, 1, "{claim}");
            }
        }
        // The key rotation: the next keys by a skip scan, then one range of each key's pending jobs
        // and one of its running ones.
        let keys = generic_plan(crate::api::keys::KEYS, "text, text, int, bool, bool", "'q1', '', 32, true, true");
        assert_no_sort_and_no_seq_scan(&keys);
        assert_reads_index(&keys, "jq_live_jobs_key_claim");
        let (lean, starvation) = crate::api::claim::statements_keyed(false, false, false);
        let (ordered_lean, ordered_starvation) = crate::api::claim::statements_keyed(true, false, false);
        let (rated_lean, rated_starvation) = crate::api::claim::statements_keyed(false, true, false);
        let (own_lean, own_starvation) = crate::api::claim::statements_keyed(false, false, true);
        for (batch, key_rate, statement) in [
            (1, "NULL, NULL", lean),
            (1, "NULL, NULL", starvation),
            (1000, "NULL, NULL", starvation),
            (1, "5, now()", rated_lean),
            (1000, "5, now()", rated_starvation),
            (1, "NULL, NULL", ordered_lean),
            (1000, "NULL, NULL", ordered_starvation),
            (1, "NULL, NULL", own_lean),
            (1000, "NULL, NULL", own_starvation),
        ] {
            let keyed = generic_plan(
                statement,
                &format!("{CLAIM_TYPES}, text[], int[], int, timestamptz, int"),
                &format!(
                    "'q1', 'w', '1 minute', {batch}, now(), 1, 0, 2147483647, '-infinity', -9223372036854775808, \
                     NULL, '5 minutes', ARRAY['k1', 'k2'], ARRAY[{batch}, {batch}], {key_rate}, 1"
                ),
            );
            // A key's own limit by its key, read only by the statements of a queue that has some;
            // the queue's limit is the session's, never read here.
            let own = [own_lean, own_starvation].contains(&statement);
            assert!(plan_nodes(&keyed).iter().all(|n| n["Relation Name"] != "jq_queues"), "{keyed}");
            if own {
                assert_index_cond(&keyed, "jq_key_settings_pkey", "concurrency_key = ");
            } else {
                assert!(plan_nodes(&keyed).iter().all(|n| n["Relation Name"] != "jq_key_settings"), "{keyed}");
            }
            assert_sorts_only_starving_jobs(&keyed);
            let ordered = [ordered_lean, ordered_starvation].contains(&statement);
            let reads_ordering = plan_nodes(&keyed).iter().any(|n| n["Index Name"] == "jq_live_jobs_ordering");
            assert_eq!(reads_ordering, ordered, "{keyed}");
            assert_reads_index(&keyed, "jq_live_jobs_key_claim");
            assert_index_cond(&keyed, "jq_live_jobs_running", "concurrency_key = ");
            // A key's free slots are counted once, not once in each LIMIT that takes them.
            let counts = plan_nodes(&keyed).iter().filter(|n| n["Index Name"] == "jq_live_jobs_running").count();
            assert_eq!(counts, 1, "{keyed}");
            assert_has_node(&keyed, "Tid Scan");
            // The key rate's count by its key, read only by the statements of a queue with a key rate.
            if key_rate == "NULL, NULL" {
                assert!(plan_nodes(&keyed).iter().all(|n| n["Relation Name"] != "jq_rate_counts"), "{keyed}");
            } else {
                assert_index_cond(&keyed, "jq_rate_counts_pkey", "concurrency_key = ");
            }
        }
        // The rates' counts, by their key.
        let used = generic_plan(include_str!("../../sql/queries/rate_used.sql"), "text, text", "'q1', ''");
        assert_index_cond(&used, "jq_rate_counts_pkey", "concurrency_key = ");
        let look = generic_plan(
            include_str!("../../sql/queries/claim_front.sql"),
            "text, int, timestamptz, bigint",
            "'q1', 2, now() - interval '1 hour', 5000",
        );
        assert_no_sort_and_no_seq_scan(&look);
        assert_reads_index(&look, "jq_live_jobs_claim");
        assert_reads_index(&look, "jq_live_jobs_ordering");
        assert_front_bounds_the_index_walk(&look);
        let running = generic_plan(include_str!("../../sql/queries/claim_running.sql"), "text", "'q3'");
        assert_no_seq_scan(&running);
        // What a waiting claim runs between its looks.
        let next_due = generic_plan(crate::api::wait::NEXT_DUE, "text, timestamptz", "'q1', now()");
        assert_no_seq_scan(&next_due);
        assert_reads_index(&next_due, "jq_live_jobs_claim");
        let any_due = generic_plan(crate::api::claim::ANY_DUE, "text, timestamptz", "'q1', now()");
        assert_no_seq_scan(&any_due);
        assert_reads_index(&any_due, "jq_live_jobs_claim");
        let slot_free = generic_plan(crate::api::claim::slot_free(), "text, timestamptz", "'q3', now()");
        assert_no_seq_scan(&slot_free);
        assert_reads_index(&slot_free, "jq_live_jobs_claim");
        let holder = generic_plan(include_str!("../../sql/queries/enqueue_existing.sql"), "text, text", "'q1', 'k'");
        assert_no_seq_scan(&holder);
        // A re-drive first reads the job's dedup key (then looks for its holder as above).
        let dedup_key = generic_plan(crate::api::redrive::DEDUP_KEY, "bigint", "1");
        assert_no_seq_scan(&dedup_key);
        assert_reads_index(&dedup_key, "jq_live_jobs_pkey");
        // A caller that is neither a superuser nor the owner has its jobs' queues looked up before
        // a verb acts on them (rights::usable_jobs).
        let job_queues = generic_plan(include_str!("../../sql/queries/job_queues_live.sql"), "bigint[]", "ARRAY[1]");
        assert_no_seq_scan(&job_queues);
        assert_reads_index(&job_queues, "jq_live_jobs_pkey");
        let ([(complete, complete_kept), (batch, batch_kept)], [forget, batch_forget]) =
            crate::api::lease::completions();
        // While no queue keeps nothing, a completion reads neither the settings nor the events.
        for kept in [complete_kept, batch_kept] {
            let code: Vec<&str> = kept.lines().filter(|line| !line.trim_start().starts_with("--")).collect();
            for table in ["jq_queues", "jq_queue_ids", "jq_job_events"] {
                assert!(!code.iter().any(|line| line.contains(table)), "{table}: {kept}");
            }
        }
        // A completion that forgets its job reads no settings and writes no history; the job's
        // events are found by their job.
        let forgetting =
            generic_plan(forget, "bigint, text, bigint, timestamptz, int, text", "1, 'w', 1, now(), 1, 'running'");
        for table in ["jq_queues", "jq_queue_ids", "jq_job_history"] {
            assert!(!plan_nodes(&forgetting).iter().any(|n| n["Relation Name"] == table), "{table}: {forgetting}");
        }
        assert_reads_index(&forgetting, "jq_job_events_job");
        let batch_forgetting = generic_plan(
            batch_forget,
            "bigint[], text, bigint[], timestamptz, text, int",
            "ARRAY[1, 2], 'w', ARRAY[1, 1], now(), 'running', 1",
        );
        for table in ["jq_queues", "jq_queue_ids", "jq_job_history"] {
            let nodes = plan_nodes(&batch_forgetting);
            assert!(!nodes.iter().any(|n| n["Relation Name"] == table), "{table}: {batch_forgetting}");
        }
        assert_no_seq_scan(&batch_forgetting);
        assert_reads_index(&batch_forgetting, "jq_live_jobs_pkey");
        assert_reads_index(&batch_forgetting, "jq_job_events_job");
        let by_id = [
            (complete, "bigint, text, bigint, timestamptz, jsonb, text", "1, 'w', 1, now(), NULL, 'running'"),
            (complete_kept, "bigint, text, bigint, timestamptz, jsonb, text", "1, 'w', 1, now(), NULL, 'running'"),
            (forget, "bigint, text, bigint, timestamptz, int, text", "1, 'w', 1, now(), 1, 'running'"),
            (
                batch,
                "bigint[], text, bigint[], timestamptz, text, jsonb[]",
                "ARRAY[1, 2], 'w', ARRAY[1, 1], now(), 'running', NULL",
            ),
            (
                batch_kept,
                "bigint[], text, bigint[], timestamptz, text, jsonb[]",
                "ARRAY[1, 2], 'w', ARRAY[1, 1], now(), 'running', NULL",
            ),
            (
                include_str!("../../sql/queries/progress.sql"),
                "bigint, text, bigint, jsonb, timestamptz, text",
                "1, 'w', 1, '{}', now(), 'running'",
            ),
            (
                include_str!("../../sql/queries/snooze.sql"),
                "bigint, text, bigint, interval, timestamptz, text",
                "1, 'w', 1, '1 s', now(), 'running'",
            ),
            (
                include_str!("../../sql/queries/heartbeat.sql"),
                "bigint, text, bigint, interval, timestamptz, text",
                "1, 'w', 1, NULL, now(), 'running'",
            ),
            (
                include_str!("../../sql/queries/fail.sql"),
                "bigint, text, bigint, text, text, boolean, interval, timestamptz, text",
                "1, 'w', 1, 'E', NULL, true, NULL, now(), 'running'",
            ),
        ];
        let redrive = [
            (include_str!("../../sql/queries/retry.sql"), "bigint, timestamptz", "1, now()"),
            (include_str!("../../sql/queries/cancel.sql"), "bigint, timestamptz", "1, now()"),
            (include_str!("../../sql/queries/purge_job.sql"), "bigint", "1"),
        ];
        for (sql, types, args) in redrive {
            let plan = generic_plan(sql, types, args);
            assert_no_seq_scan(&plan);
            assert!(!plan_nodes(&plan).iter().any(|n| n["Index Name"] == "jq_live_jobs_unresolved"), "{plan}");
        }
        for (sql, types, args) in by_id {
            let plan = generic_plan(sql, types, args);
            assert_no_seq_scan(&plan);
            assert_reads_index(&plan, "jq_live_jobs_pkey");
            assert!(!plan_nodes(&plan).iter().any(|n| n["Index Name"] == "jq_live_jobs_running"), "{plan}");
        }
        for (sql, dedup_key) in [
            (include_str!("../../sql/queries/enqueue.sql"), "NULL"),
            (include_str!("../../sql/queries/enqueue_dedup.sql"), "'k'"),
        ] {
            let enqueue = generic_plan(
                sql,
                "int, jsonb, int, timestamptz, int, text, text, timestamptz, text, timestamptz, bigint[], int",
                &format!("1, '{{}}', 0, NULL, 8, {dedup_key}, NULL, now(), 'k', NULL, NULL, 0"),
            );
            assert_no_seq_scan(&enqueue);
            // The queue's number and default max_attempts are the session's kept settings.
            for table in ["jq_queues", "jq_queue_ids"] {
                assert!(!plan_nodes(&enqueue).iter().any(|n| n["Relation Name"] == table), "{table}: {enqueue}");
            }
        }
    }

    /// The workflow statements (guide, "Workflows") find their rows by primary keys, whatever the
    /// statistics said when the session's plan was made: a completion's count-down reads the
    /// dependencies' key from the completed jobs, and a failure's round as well.
    #[pg_test]
    fn workflow_statements_read_by_key() {
        // What `run` sets while it plans and runs them.
        run("SET LOCAL plan_cache_mode = force_generic_plan");
        run("SET LOCAL enable_seqscan = off");
        for (sql, types, args, index) in [
            (include_str!("../../sql/queries/dependencies_states.sql"), "bigint[]", "ARRAY[1]", "jq_live_jobs_pkey"),
            (
                include_str!("../../sql/queries/dependencies_relink.sql"),
                "bigint, bigint[], boolean[]",
                "1, ARRAY[2], ARRAY[false]",
                "jq_job_dependencies_pkey",
            ),
            (
                include_str!("../../sql/queries/dependencies_ended.sql"),
                "int, bigint",
                "1000, 0",
                "jq_job_dependencies_unsettled",
            ),
            (
                include_str!("../../sql/queries/dependencies_release.sql"),
                "bigint[], int[], timestamptz",
                "ARRAY[1], ARRAY[1], now()",
                "jq_live_jobs_pkey",
            ),
            (
                include_str!("../../sql/queries/dependencies_release_one.sql"),
                "bigint, int, timestamptz",
                "1, 1, now()",
                "jq_live_jobs_pkey",
            ),
            (
                include_str!("../../sql/queries/dependencies_unpart.sql"),
                "bigint[]",
                "ARRAY[3]",
                "jq_dependency_parts_pkey",
            ),
            (
                include_str!("../../sql/queries/dependencies_settle.sql"),
                "bigint[], int, bigint[], bigint[]",
                "ARRAY[1], 100, ARRAY[3], ARRAY[2]",
                "jq_job_dependencies_unsettled",
            ),
            (
                include_str!("../../sql/queries/dependencies_count_part.sql"),
                "bigint, int, int",
                "1, 1, 1",
                "jq_dependency_parts_pkey",
            ),
            (
                include_str!("../../sql/queries/dependencies_count_parts.sql"),
                "bigint[], int[], int[]",
                "ARRAY[1], ARRAY[1], ARRAY[1]",
                "jq_dependency_parts_pkey",
            ),
            (
                include_str!("../../sql/queries/dependencies_cancel.sql"),
                "bigint[], bigint[], timestamptz",
                "ARRAY[1], ARRAY[2], now()",
                "jq_live_jobs_pkey",
            ),
            (include_str!("../../sql/queries/parent_results.sql"), "bigint", "1", "jq_live_jobs_pkey"),
        ] {
            let plan = generic_plan(sql, types, args);
            assert_no_seq_scan(&plan);
            assert_reads_index(&plan, index);
        }
        // A completed job's own rows are found by their whole key, not among every row of each of
        // its dependencies (a fan-out's jobs would each read all their siblings' rows); and so are
        // the rows the statement settles, once it has picked them from those still unsettled.
        let settle = generic_plan(
            include_str!("../../sql/queries/dependencies_settle.sql"),
            "bigint[], int, bigint[], bigint[]",
            "ARRAY[1], 100, ARRAY[3], ARRAY[2]",
        );
        assert_eq!(
            plan_nodes(&settle)
                .iter()
                .filter(|n| n["Index Name"] == "jq_job_dependencies_pkey"
                    && n["Index Cond"].as_str().is_some_and(|c| c.contains("job_id = ")))
                .count(),
            2,
            "{settle}"
        );
    }

    /// A claim statement has a plan node only for what its queue uses (guide, "jq_configure"):
    /// none reads the settings, which the session keeps, nor the rates' counts; and only a queue
    /// that has had a job with an ordering key (`ordered`) has the ordering-key check's.
    fn assert_sized_to_the_queue(plan: &serde_json::Value, ordered: bool) {
        let nodes = plan_nodes(plan);
        for table in ["jq_queues", "jq_queue_ids", "jq_key_settings", "jq_rate_counts"] {
            assert!(!nodes.iter().any(|n| n["Relation Name"] == table), "{table}: {plan}");
        }
        let reads_ordering = nodes.iter().any(|n| n["Index Name"] == "jq_live_jobs_ordering");
        assert_eq!(reads_ordering, ordered, "{plan}");
    }

    /// The generic plan PostgreSQL makes for `sql` prepared with parameters of `types`.
    fn generic_plan(sql: &str, types: &str, args: &str) -> serde_json::Value {
        run(&format!("PREPARE jq_plan_test ({types}) AS {sql}"));
        let plan = Spi::explain(&format!("EXECUTE jq_plan_test ({args})")).unwrap().0;
        run("DEALLOCATE jq_plan_test");
        plan
    }

    /// The claim front is where the walk of the claim index starts (an index condition), not a
    /// filter on every entry from the queue's first: that is what lets claims skip the entries an
    /// old snapshot keeps.
    fn assert_front_bounds_the_index_walk(plan: &serde_json::Value) {
        let bounded = plan_nodes(plan).iter().any(|n| {
            n["Index Name"] == "jq_live_jobs_claim"
                && n["Index Cond"].as_str().is_some_and(|c| c.contains("ROW(available_at, id) >= ROW("))
        });
        assert!(bounded, "the claim front does not bound the walk of jq_live_jobs_claim: {plan}");
    }

    /// The plan reads `index` with `condition` among its index conditions, not as a filter.
    fn assert_index_cond(plan: &serde_json::Value, index: &str, condition: &str) {
        let found = plan_nodes(plan)
            .iter()
            .any(|n| n["Index Name"] == index && n["Index Cond"].as_str().is_some_and(|c| c.contains(condition)));
        assert!(found, "the plan does not read {index} by {condition}: {plan}");
    }

    fn assert_has_node(plan: &serde_json::Value, node_type: &str) {
        assert!(plan_nodes(plan).iter().any(|n| n["Node Type"] == node_type), "the plan has no {node_type}: {plan}");
    }

    /// 100k succeeded jobs and 10k pending ones (five priorities, a second apart) over four queues.
    fn add_history_and_backlog() {
        run(
            "INSERT INTO jq_queue_ids (queue_name) SELECT 'q' || i FROM generate_series(0, 3) i ON CONFLICT DO NOTHING",
        );
        run("INSERT INTO jq_job_history (id, queue_id, payload, priority, available_at, attempt_count, max_attempts, lease_token, created_at, finished_at)
             SELECT nextval('jq_jobs_id_seq'), n.queue_id, '{}', 0, now(), 1, 8, 1, now(), now()
             FROM generate_series(1, 100000) i JOIN jq_queue_ids n ON n.queue_name = 'q' || (i % 4)");
        run("INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts, created_at)
             SELECT n.queue_id, '{}', i % 5, now() - (i || ' s')::interval, 8, now()
             FROM generate_series(1, 10000) i JOIN jq_queue_ids n ON n.queue_name = 'q' || (i % 4)");
        // And 10k with a concurrency key (100 keys), a tenth of them running.
        run("INSERT INTO jq_live_jobs (queue_id, payload, priority, available_at, max_attempts, created_at,
                                       concurrency_key, status, lease_owner, lease_expires_at, attempt_count)
             SELECT n.queue_id, '{}', 0, now() - (i || ' s')::interval, 8, now(), 'k' || (i % 100),
                    CASE WHEN i % 10 = 0 THEN 'running' ELSE 'pending' END::jq_status,
                    CASE WHEN i % 10 = 0 THEN 'w' END, CASE WHEN i % 10 = 0 THEN now() + interval '1 h' END,
                    CASE WHEN i % 10 = 0 THEN 1 ELSE 0 END
             FROM generate_series(1, 10000) i JOIN jq_queue_ids n ON n.queue_name = 'q' || (i % 4)");
    }

    fn plan_nodes(plan: &serde_json::Value) -> Vec<&serde_json::Value> {
        let mut nodes = Vec::new();
        collect_plan_nodes(plan, &mut nodes);
        nodes
    }

    fn assert_no_seq_scan(plan: &serde_json::Value) {
        for node in plan_nodes(plan) {
            let relation = node["Relation Name"].as_str().unwrap_or_default();
            let jobs = relation == "jq_live_jobs" || relation.starts_with("jq_job_history");
            let scans_jobs = node["Node Type"] == "Seq Scan" && jobs;
            assert!(!scans_jobs, "the plan scans {relation} sequentially: {plan}");
        }
    }

    /// The claim's one sort: the fairness check's starving jobs, at most batch_size of each priority
    /// (the subtree that reads the `oldest` probes), oldest first. Nothing else is sorted.
    fn assert_sorts_only_starving_jobs(plan: &serde_json::Value) {
        assert_no_seq_scan(plan);
        for sort in plan_nodes(plan).into_iter().filter(|n| n["Node Type"] == "Sort") {
            let over_starving =
                plan_nodes(sort).iter().any(|n| n["Node Type"] == "CTE Scan" && n["CTE Name"] == "oldest");
            assert!(over_starving, "the plan sorts more than the starving jobs: {plan}");
        }
    }

    fn assert_no_sort_and_no_seq_scan(plan: &serde_json::Value) {
        assert_no_seq_scan(plan);
        assert!(plan_nodes(plan).iter().all(|n| n["Node Type"] != "Sort"), "the plan sorts: {plan}");
    }

    /// No subquery that runs once per row reads one of the statement's WITH results: it would read
    /// all of them for every row, quadratic in the rows the statement changes (a reap pass of
    /// 10,000 leases took 4 s so).
    fn assert_no_with_read_per_row(plan: &serde_json::Value) {
        for subplan in plan_nodes(plan).into_iter().filter(|n| n["Parent Relationship"] == "SubPlan") {
            let read = plan_nodes(subplan).into_iter().find(|n| n["Node Type"] == "CTE Scan");
            assert!(
                read.is_none(),
                "a subquery reads {} once per row: {plan}",
                read.map_or("", |n| n["CTE Name"].as_str().unwrap_or(""))
            );
        }
    }

    fn assert_reads_index(plan: &serde_json::Value, index: &str) {
        assert!(plan_nodes(plan).iter().any(|n| n["Index Name"] == index), "the plan does not read {index}: {plan}");
    }

    fn collect_plan_nodes<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        match value {
            serde_json::Value::Object(map) => {
                if map.contains_key("Node Type") {
                    out.push(value);
                }
                map.values().for_each(|v| collect_plan_nodes(v, out));
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| collect_plan_nodes(v, out)),
            _ => {}
        }
    }
}
