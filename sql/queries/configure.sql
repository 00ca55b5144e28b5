-- $1 queue_name, $2 settings: a jsonb object whose keys the caller checked against the columns
-- Sets the settings named in $2 (a JSON null sets NULL) and keeps the others; the table's
-- constraints refuse a bad value. Returns the queue's settings after the change.
UPDATE jq_queues q
SET (default_lease, max_attempts, backoff_base, backoff_cap, max_runtime, paused, concurrency_limit,
     key_concurrency_limit, rate_limit, rate_period, key_rate_limit, key_rate_period, starvation_limit,
     retention, notify, warn_claimable_age, warn_expiring_leases, warn_dead_age, keep_succeeded)
  = (SELECT r.default_lease, r.max_attempts, r.backoff_base, r.backoff_cap, r.max_runtime, r.paused,
            r.concurrency_limit, r.key_concurrency_limit, r.rate_limit, r.rate_period, r.key_rate_limit,
            r.key_rate_period, r.starvation_limit, r.retention, r.notify, r.warn_claimable_age,
            r.warn_expiring_leases, r.warn_dead_age, r.keep_succeeded
     FROM pg_catalog.jsonb_populate_record(q, $2) r)
WHERE q.queue_name = $1
RETURNING pg_catalog.to_jsonb(q) OPERATOR(pg_catalog.-) 'queue_name'::text,
          extract(epoch FROM q.default_lease)::float8
