-- The figures views. Each shows a role only the queues it may see (jq_can_see: any right on the
-- queue, membership in pg_monitor, or the owner's rights); security_barrier keeps a caller's own
-- functions in WHERE from seeing rows before that filter.
--
-- One row per queue that has a settings row or any live, dead or cancelled job. Each part reads one
-- partial index, so the cost grows with live and unresolved jobs, not with succeeded history. The
-- clock is read once, and it is the clock the claim uses: "pending" means what jq_claim would take.
CREATE VIEW jq_queue_stats WITH (security_barrier) AS
WITH clock AS MATERIALIZED (
    SELECT pg_catalog.clock_timestamp() AS now
), pending AS (
    SELECT n.queue_name,
           pg_catalog.count(*) FILTER (WHERE j.awaiting = 0 AND j.available_at <= c.now) AS pending,
           pg_catalog.count(*) FILTER (WHERE j.awaiting = 0 AND j.available_at > c.now) AS scheduled,
           pg_catalog.min(j.available_at) FILTER (WHERE j.awaiting = 0 AND j.available_at <= c.now) AS oldest_claimable,
           -- Held until their dependencies succeed (guide, "Workflows"), neither pending nor scheduled.
           pg_catalog.count(*) FILTER (WHERE j.awaiting > 0) AS held_by_dependency
    FROM jq_live_jobs j JOIN jq_queue_ids n USING (queue_id), clock c
    WHERE j.status OPERATOR(pg_catalog.=) 'pending' GROUP BY n.queue_name
), running AS (
    SELECT n.queue_name,
           pg_catalog.count(*) AS running,
           pg_catalog.count(*) FILTER (WHERE j.lease_expires_at <= c.now + interval '10 seconds') AS expiring
    FROM jq_live_jobs j JOIN jq_queue_ids n USING (queue_id), clock c
    WHERE j.status OPERATOR(pg_catalog.=) 'running' GROUP BY n.queue_name
), unresolved AS (
    SELECT n.queue_name,
           pg_catalog.count(*) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'dead') AS dead,
           pg_catalog.count(*) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'cancelled') AS cancelled,
           pg_catalog.min(j.finished_at) FILTER (WHERE j.status OPERATOR(pg_catalog.=) 'dead') AS oldest_dead
    FROM jq_live_jobs j JOIN jq_queue_ids n USING (queue_id)
    WHERE j.status OPERATOR(pg_catalog.=) ANY (ARRAY['dead', 'cancelled']::jq_status[]) GROUP BY n.queue_name
), keys AS (
    -- Flow control (guide, "Flow control"): each concurrency key's claimable jobs, whether its
    -- running jobs (under a current lease, as the limit counts them) are at its limit, and whether
    -- its rate's window is used up.
    SELECT n.queue_name, k.due,
           coalesce(s.concurrency_limit, q.key_concurrency_limit) <= (
               SELECT pg_catalog.count(*) FROM jq_live_jobs r
               WHERE r.queue_id = k.queue_id AND r.concurrency_key = k.concurrency_key
                 AND r.status OPERATOR(pg_catalog.=) 'running' AND r.lease_expires_at > k.now) AS at_limit,
           q.key_rate_limit <= (
               SELECT rc.claims FROM jq_rate_counts rc
               WHERE rc.queue_id = k.queue_id AND rc.concurrency_key = k.concurrency_key
                 AND rc.window_start > k.now - q.key_rate_period) AS rate_used_up
    FROM (
        SELECT j.queue_id, j.concurrency_key, c.now, pg_catalog.count(*) AS due
        FROM jq_live_jobs j, clock c
        WHERE j.status OPERATOR(pg_catalog.=) 'pending' AND j.awaiting = 0 AND j.concurrency_key IS NOT NULL AND j.available_at <= c.now
        GROUP BY j.queue_id, j.concurrency_key, c.now
    ) AS k
    JOIN jq_queue_ids n ON n.queue_id = k.queue_id
    LEFT JOIN jq_queues q ON q.queue_name = n.queue_name
    LEFT JOIN jq_key_settings s ON s.queue_name = n.queue_name AND s.concurrency_key = k.concurrency_key
), held AS (
    SELECT k.queue_name,
           pg_catalog.sum(k.due) FILTER (WHERE k.at_limit) AS by_key_limit,
           pg_catalog.sum(k.due) FILTER (WHERE k.rate_used_up) AS by_key_rate
    FROM keys k GROUP BY k.queue_name
), queues AS (
    SELECT q.queue_name FROM jq_queues q
    UNION SELECT p.queue_name FROM pending p
    UNION SELECT r.queue_name FROM running r
    UNION SELECT u.queue_name FROM unresolved u
)
SELECT q.queue_name,
       coalesce(p.pending, 0)   AS pending,
       coalesce(p.scheduled, 0) AS scheduled,
       coalesce(r.running, 0)   AS running,
       coalesce(r.expiring, 0)  AS expiring_10s,
       coalesce(u.dead, 0)      AS dead,
       coalesce(u.cancelled, 0) AS cancelled,
       c.now - p.oldest_claimable AS oldest_claimable_age,
       c.now - u.oldest_dead      AS oldest_dead_age,
       -- Claimable jobs each limit holds back now: all of them while the queue runs its
       -- concurrency_limit or has used up its rate's window; a key's, while the key does.
       CASE WHEN s.concurrency_limit <= coalesce(r.running, 0) THEN coalesce(p.pending, 0) ELSE 0 END
           AS held_by_concurrency_limit,
       coalesce(h.by_key_limit, 0)::bigint AS held_by_key_limit,
       CASE WHEN s.rate_limit <= (SELECT rc.claims FROM jq_rate_counts rc JOIN jq_queue_ids n USING (queue_id)
                                  WHERE n.queue_name = q.queue_name AND rc.concurrency_key = ''
                                    AND rc.window_start > c.now - s.rate_period)
            THEN coalesce(p.pending, 0) ELSE 0 END AS held_by_rate_limit,
       coalesce(h.by_key_rate, 0)::bigint AS held_by_key_rate_limit,
       -- A paused queue's claimable jobs all wait for jq_configure(queue, '{"paused": false}').
       CASE WHEN s.paused THEN coalesce(p.pending, 0) ELSE 0 END AS held_by_pause,
       coalesce(p.held_by_dependency, 0) AS held_by_dependency
FROM queues q
CROSS JOIN clock c
LEFT JOIN pending p USING (queue_name)
LEFT JOIN running r USING (queue_name)
LEFT JOIN unresolved u USING (queue_name)
LEFT JOIN held h USING (queue_name)
LEFT JOIN jq_queues s USING (queue_name)
WHERE jq_can_see(q.queue_name);

-- What operators alert on, per queue: the oldest claimable job's age, running jobs whose lease ends
-- within 10 s, the oldest dead job's age (dead and neither re-driven nor purged), each with its
-- threshold from jq_queues (the defaults written there for a queue without a row) and a flag.
CREATE VIEW jq_queue_health WITH (security_barrier) AS
SELECT s.queue_name,
       s.oldest_claimable_age,
       s.expiring_10s AS expiring_leases,
       s.oldest_dead_age,
       t.warn_claimable_age,
       t.warn_expiring_leases,
       t.warn_dead_age,
       coalesce(s.oldest_claimable_age > t.warn_claimable_age, false) AS claimable_age_warning,
       coalesce(s.expiring_10s >= t.warn_expiring_leases, false)     AS expiring_leases_warning,
       coalesce(s.oldest_dead_age > t.warn_dead_age, false)           AS dead_age_warning,
       -- Slow because limited, not for want of workers: claimable jobs some limit holds back (the
       -- largest of jq_queue_stats' held_by_ figures, which may overlap; a pause holds back all).
       greatest(s.held_by_concurrency_limit, s.held_by_key_limit, s.held_by_rate_limit,
                s.held_by_key_rate_limit, s.held_by_pause) AS held_back,
       coalesce(q.paused, false) AS paused,
       -- Nothing maintains the queue's database lately (jq_maintenance): expired leases, ticks
       -- and retention wait.
       (SELECT m.stale FROM jq_maintenance_status() m) AS maintenance_stale
FROM jq_queue_stats s
LEFT JOIN jq_queues q ON q.queue_name = s.queue_name
CROSS JOIN LATERAL (
    SELECT CASE WHEN q.queue_name IS NULL THEN interval '5 minutes' ELSE q.warn_claimable_age END
               AS warn_claimable_age,
           CASE WHEN q.queue_name IS NULL THEN 10 ELSE q.warn_expiring_leases END
               AS warn_expiring_leases,
           CASE WHEN q.queue_name IS NULL THEN interval '1 hour' ELSE q.warn_dead_age END
               AS warn_dead_age
) t;

-- Who maintains this database, `worker`, `inline` (claims) or `none`, when each pass last ran,
-- and whether one is overdue (guide, "Maintenance").
CREATE VIEW jq_maintenance AS SELECT * FROM jq_maintenance_status();

-- The jobs, and their events, of the queues the caller may manage: what an operator reads to decide
-- on a re-drive or a cancel, without a right on the tables (guide, "Security").
CREATE VIEW jq_managed_jobs WITH (security_barrier) AS
SELECT j.* FROM jq_jobs j WHERE jq_has_right(j.queue_name, 'manage');

CREATE VIEW jq_managed_job_events WITH (security_barrier) AS
SELECT e.* FROM jq_job_events e WHERE jq_has_right(e.queue_name, 'manage');

-- The schedules of the queues the caller may manage (guide, "Schedules"): each one's settings, its
-- last and next run (none while paused), and the status of the job it enqueued last.
CREATE VIEW jq_schedules WITH (security_barrier) AS
SELECT s.name, s.cron, s.time_zone, s.queue_name, s.payload, s.paused, s.last_run,
       CASE WHEN s.paused THEN NULL ELSE s.next_run END AS next_run, s.last_job_id,
       (SELECT j.status FROM jq_jobs j WHERE j.id = s.last_job_id) AS last_job_status,
       s.catch_up, s.catch_up_limit, s.priority, s.max_attempts, s.dedup_key, s.ordering_key,
       s.concurrency_key, s.created_at
FROM jq_schedule_specs s
WHERE jq_has_right(s.queue_name, 'manage');
