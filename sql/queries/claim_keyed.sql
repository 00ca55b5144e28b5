-- Parameters $1 to $12 as in claim.sql; $13 the concurrency keys this claim holds the key locks of
-- (src/api/keys.rs), in the rotation's order; $14 for each, at most how many of its jobs to take;
-- $15 the key rate limit (NULL: none) and $16 its window now (src/api/rates.rs); $17 the queue's
-- key_concurrency_limit (NULL: none), as the session keeps it (src/api/settings.rs).
--
-- The start of the keyed claim statement, which parts/claim_update.sql ends, as claim.sql's does
-- (src/api/claim/take.rs joins them, and drops the latter's fairness section: starvation is
-- looked for key by key here). Like claim.sql, this takes the ordering-key check only for a
-- queue that has had a job with an ordering key. For each key: its free slots, its limit (its own, or the queue's key_concurrency_limit)
-- less its jobs running under a current lease, counted in this statement's snapshot, which was
-- taken after the caller took the key's lock, so every claim of the key that committed before is
-- counted and none that has not can run; then its starving jobs, oldest first, and its first
-- claimable jobs in claim order, as many in all as its slots, its rate and its share allow.
--
-- Plan notes, checked by the plan tests: ranges of the key claim index per key (the starvation
-- probes, then claim order), and one of the running index (queue and key) for its count; the only
-- sort is of the starving jobs. `LIMIT` refers to the key's own row (a lateral reference), so
-- each key stops after its share; locked rows are only those returned.
WITH keys AS (
    SELECT k.concurrency_key, k.share, k.turn
    FROM ROWS FROM (pg_catalog.unnest($13::text[]), pg_catalog.unnest($14::int[]))
         WITH ORDINALITY AS k(concurrency_key, share, turn)
), picked AS (
    SELECT c.ctid
    FROM keys
    CROSS JOIN LATERAL (
        -- The key's own limit, or the queue's, or none. A queue without a row in jq_key_settings
        -- has no key of its own limit to look up: its statements are made without this section
        -- (src/api/claim/take.rs), whose plan nodes every claim started and ended.
        SELECT coalesce(
-- key settings: begin
                        (SELECT s.concurrency_limit FROM jq_key_settings s
                         WHERE s.queue_name = $1 AND s.concurrency_key = keys.concurrency_key),
-- key settings: end
                        $17::int, 2147483647)
               OPERATOR(pg_catalog.-) (
                   SELECT pg_catalog.count(*)::int
                   FROM jq_live_jobs r
                   WHERE r.queue_id = $6
                     AND r.concurrency_key = keys.concurrency_key
                     AND r.status OPERATOR(pg_catalog.=) 'running'
                     AND r.lease_expires_at > $5) AS free
    ) AS slots
    CROSS JOIN LATERAL (
        -- The key's rate: what is left of it in this window. A count of a newer window (another
        -- claim read a later clock) leaves nothing: this claim's window is over.
        -- A queue without a key rate has none to look up: its statement is made without this
        -- section (src/api/claim/take.rs), whose plan nodes every claim started and ended.
-- key rate: begin
        SELECT CASE WHEN $15::int IS NULL THEN 2147483647
                    ELSE coalesce((SELECT CASE WHEN c.window_start > $16::timestamptz THEN 0
                                               WHEN c.window_start = $16::timestamptz
                                               THEN $15::int OPERATOR(pg_catalog.-) c.claims
                                               ELSE $15::int END
                                   FROM jq_rate_counts c
                                   WHERE c.queue_id = $6
                                     AND c.concurrency_key = keys.concurrency_key), $15::int) END AS free
-- key rate: end
-- without key rate:         SELECT 2147483647 AS free
    ) AS rate
    CROSS JOIN LATERAL (
        -- Computed once per key. Without OFFSET 0 the planner writes this expression, with the
        -- look-ups above in it, into each LIMIT below: every claim started and ran them twice.
        SELECT greatest(least(keys.share, slots.free, rate.free), 0) AS n
        OFFSET 0
    ) AS take
    CROSS JOIN LATERAL (
        -- Starving jobs of the key first, oldest first (guide, "Fairness", within each key): its
        -- priorities by a skip scan of the key claim index, each with its oldest pending job, and
        -- of those whose oldest starves, the oldest starving jobs, locked by ctid and checked again
        -- on the version locked. When none starves, the usual case, this reads the probes only.
        -- Then claim order. A job in both branches is returned twice and updated once. Two
        -- statements are made of this file (src/api/claim/take.rs): this one, and one without the lines
        -- from "key starvation: begin" to "key starvation: end", for claims whose keys' pending
        -- jobs all had one priority when the rotation read them (claim_keys.sql), where claim
        -- order is oldest first already.
        SELECT u.ctid FROM (
-- key starvation: begin
            SELECT s.ctid FROM (
                SELECT j.ctid
                FROM jq_live_jobs j
                WHERE j.ctid = ANY (ARRAY(
                        WITH RECURSIVE oldest AS (
                            SELECT f.priority, f.available_at
                            FROM (
                                SELECT o.priority, o.available_at
                                FROM jq_live_jobs o
                                WHERE o.queue_id = $6
                                  AND o.concurrency_key = keys.concurrency_key
                                  AND o.status OPERATOR(pg_catalog.=) 'pending'
                                  AND o.awaiting = 0 AND o.concurrency_key IS NOT NULL
                                ORDER BY o.priority DESC, o.available_at, o.id
                                LIMIT 1
                            ) AS f
                            UNION ALL
                            SELECT n.priority, n.available_at
                            FROM oldest l
                            CROSS JOIN LATERAL (
                                SELECT o.priority, o.available_at
                                FROM jq_live_jobs o
                                WHERE o.queue_id = $6
                                  AND o.concurrency_key = keys.concurrency_key
                                  AND o.status OPERATOR(pg_catalog.=) 'pending'
                                  AND o.awaiting = 0 AND o.concurrency_key IS NOT NULL
                                  AND o.priority < l.priority
                                ORDER BY o.priority DESC, o.available_at, o.id
                                LIMIT 1
                            ) AS n
                        )
                        SELECT t.ctid
                        FROM oldest l
                        CROSS JOIN LATERAL (
                            SELECT o.ctid, o.available_at, o.id
                            FROM jq_live_jobs o
                            WHERE o.queue_id = $6
                              AND o.concurrency_key = keys.concurrency_key
                              AND o.status OPERATOR(pg_catalog.=) 'pending'
                              AND o.awaiting = 0 AND o.concurrency_key IS NOT NULL
                              AND o.priority >= l.priority AND o.priority <= l.priority
                              AND o.available_at <= coalesce($5 - $12, '-infinity')
                              AND (o.expires_at IS NULL OR o.expires_at > $5)
                            ORDER BY o.priority DESC, o.available_at, o.id
                            LIMIT take.n
                        ) AS t
                        WHERE l.available_at <= coalesce($5 - $12, '-infinity')
                        ORDER BY t.available_at, t.id
                        LIMIT take.n))
                  AND j.queue_id = $6
                  AND j.concurrency_key = keys.concurrency_key
                  AND j.status OPERATOR(pg_catalog.=) 'pending'
                  AND j.available_at <= coalesce($5 - $12, '-infinity')
                  AND (j.expires_at IS NULL OR j.expires_at > $5)
                  -- ordering key check
                FOR UPDATE OF j SKIP LOCKED
            ) AS s
            UNION ALL
-- key starvation: end
            SELECT p.ctid FROM (
                SELECT j.ctid
                FROM jq_live_jobs j
                WHERE j.queue_id = $6
                  AND j.concurrency_key = keys.concurrency_key
                  AND j.status OPERATOR(pg_catalog.=) 'pending'
                  AND j.awaiting = 0 AND j.concurrency_key IS NOT NULL
                  AND j.available_at <= $5
                  AND (j.expires_at IS NULL OR j.expires_at > $5)
                  -- ordering key check
                ORDER BY j.priority DESC, j.available_at, j.id
                LIMIT take.n
                FOR UPDATE OF j SKIP LOCKED
            ) AS p
        ) AS u
        LIMIT take.n
    ) AS c
    LIMIT $4
