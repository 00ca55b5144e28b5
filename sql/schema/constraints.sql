-- Queue settings that cannot stop a queue. Every interval setting adds what it says: no part of it
-- (months, days, time) is negative, so `interval '1 mon -30 days 23:59:59'`, which compares as less
-- than a day yet adds up to two, is refused; and none exceeds 100 years, so that adding it to the
-- clock stays in range (a '300000 years' starvation_limit made every claim of its queue fail).
ALTER TABLE jq_queues
    ADD CONSTRAINT jq_queues_default_lease_bounded CHECK (jq_setting_interval_ok(default_lease)),
    ADD CONSTRAINT jq_queues_backoff_base_bounded CHECK (jq_setting_interval_ok(backoff_base)),
    ADD CONSTRAINT jq_queues_backoff_cap_bounded CHECK (jq_setting_interval_ok(backoff_cap)),
    ADD CONSTRAINT jq_queues_max_runtime_bounded CHECK (jq_setting_interval_ok(max_runtime)),
    ADD CONSTRAINT jq_queues_starvation_limit_bounded CHECK (jq_setting_interval_ok(starvation_limit)),
    ADD CONSTRAINT jq_queues_retention_bounded CHECK (jq_setting_interval_ok(retention)),
    ADD CONSTRAINT jq_queues_warn_claimable_age_bounded CHECK (jq_setting_interval_ok(warn_claimable_age)),
    ADD CONSTRAINT jq_queues_warn_dead_age_bounded CHECK (jq_setting_interval_ok(warn_dead_age)),
    ADD CONSTRAINT jq_queues_rate_period_bounded CHECK (jq_setting_interval_ok(rate_period)),
    ADD CONSTRAINT jq_queues_key_rate_period_bounded CHECK (jq_setting_interval_ok(key_rate_period));

-- The invariant of every job row, whoever writes it (guide, "Tables and views"): max_attempts at
-- least 1, attempt_count within it, and a lease (owner and expiry) exactly while the job runs. One
-- call of a compiled function, not the expression it computes: PostgreSQL reads and compiles a
-- table's CHECK expressions afresh for each statement that writes the table, so the expression
-- written out cost every enqueue, claim and completion 6 to 7 µs, the call about 2 (src/api/lease.rs).
ALTER TABLE jq_live_jobs
    ADD CONSTRAINT jq_live_jobs_consistent
    CHECK (jq_live_job_consistent(status, max_attempts, attempt_count,
                                  lease_owner IS NOT NULL, lease_expires_at IS NOT NULL));

-- Tell every session to forget the queue settings it keeps when they change (src/api/settings.rs),
-- through the one trigger function of the tables sessions keep something of (its path pinned like
-- every other function's; the trigger on jq_grants uses it too).
ALTER FUNCTION jq_table_changed() SET search_path = pg_catalog, @extschema@, pg_temp;
CREATE TRIGGER jq_settings_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jq_queues
    FOR EACH STATEMENT EXECUTE FUNCTION jq_table_changed();
-- INSERT too: a first enqueue's number, kept by its session, is forgotten if its transaction
-- rolls back (PostgreSQL replays a rolled-back transaction's invalidations in its own session).
CREATE TRIGGER jq_settings_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jq_queue_ids
    FOR EACH STATEMENT EXECUTE FUNCTION jq_table_changed();
-- And the keys' own settings, which a keyed claim looks up only in a queue that has some.
CREATE TRIGGER jq_settings_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON jq_key_settings
    FOR EACH STATEMENT EXECUTE FUNCTION jq_table_changed();
