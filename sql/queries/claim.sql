-- $1 queue_name (returned), $2 worker, $3 lease, $4 batch_size, $5 now, $6 the queue's number,
-- $7 token floor: the token epoch * 2^32 (see src/api/tokens.rs); a new token is above the job's
--    last one and at least this.
-- $8, $9, $10 the claim front: priority, available_at and id of the first key a claim looks at.
-- $11 max_runtime (NULL: none), $12 starvation_limit (NULL: none).
-- The settings ($3, $6, $11, $12) are the queue's as the session keeps them (src/api/settings.rs);
-- the caller runs no claim of a paused queue, nor of a limited one before it holds the queue's row
-- lock and has reduced $4 to the free slots (src/api/claim/admit.rs).
--
-- One statement, of two files (src/api/claim/take.rs joins them): this file's `picked`, and
-- parts/claim_update.sql. It picks up to $4 claimable rows without a concurrency key
-- (those with one are taken key by key: claim_keyed.sql), skipping rows another claimer has locked,
-- and turns exactly those into running rows with a fresh lease and the next fencing token.
-- A job whose `expires_at` has passed is never picked (each branch says so); the expiry sweep
-- cancels it (expire.sql).
--
-- Six statements are made from this file (src/api/claim/take.rs, `statement` and
-- `statement_one_priority`), each with only the parts its queue uses. Without the fairness check,
-- for claims while the queue's fairness bound says no job can be starving (src/shared/front.rs;
-- guide, "Fairness"): the lines from each "fairness: begin" to its "fairness: end" are left out,
-- and each line marked "without fairness:" is taken in instead. The fairness check is half of this
-- plan, which every execution starts and ends again. Without the fairness check and without the
-- walk below the front's priority (from "priorities: begin" to "priorities: end"), for a queue
-- that has only had jobs of priority 0 while its front is on that priority (jq_queue_ids,
-- `priorities`): the rest of the front's priority is then the whole claim order. And each of
-- those with the ordering-key check (parts/ordering_key_check.sql) or not, which takes the place
-- of each "ordering key check" line. The plan tests check every statement.
--
-- Plan notes, checked by the plan tests: src/api/claim/take.rs runs this with a generic plan, prepared once per
-- session. The UPDATE finds the locked rows by `ctid = ANY(...)`, a TID scan whatever the statistics
-- said when the plan was made (`id = ANY(...)` became a sequential scan in a generic plan made while
-- the table was empty). Each ctid is that of the row version this statement locked, which no one
-- else can change before we commit. In READ COMMITTED the lock may land on a newer version than
-- this statement's snapshot sees (a pending job updated in place by another transaction, say by an
-- operator's UPDATE); the UPDATE then skips that row, the claim returns one job fewer than it locked,
-- and the lock ends with the transaction. Nothing is changed that is not returned.
WITH RECURSIVE
-- fairness: begin
oldest AS (
    -- For the fairness check: each priority that has pending jobs, from the claim front's down,
    -- with its oldest pending job, found by one probe of the claim index each (a skip scan: the
    -- first entry below the priority before). The front's priority starts at the front, since no
    -- pending job is before it; a lower one starts at its beginning.
    SELECT f.priority, f.available_at,
           CASE WHEN f.priority = $8 THEN $9 ELSE '-infinity'::timestamptz END AS from_at,
           CASE WHEN f.priority = $8 THEN $10 ELSE '-9223372036854775808'::bigint END AS from_id
    FROM (
        SELECT * FROM (
            SELECT j.priority, j.available_at
            FROM jq_live_jobs j
            WHERE j.queue_id = $6
              AND j.status OPERATOR(pg_catalog.=) 'pending'
              AND j.awaiting = 0 AND j.concurrency_key IS NULL
              AND j.priority >= $8 AND j.priority <= $8
              AND (j.available_at, j.id) >= ($9, $10)
            ORDER BY j.priority DESC, j.available_at, j.id
            LIMIT 1
        ) AS at_front
        UNION ALL
        SELECT * FROM (
            SELECT j.priority, j.available_at
            FROM jq_live_jobs j
            WHERE j.queue_id = $6
              AND j.status OPERATOR(pg_catalog.=) 'pending'
              AND j.awaiting = 0 AND j.concurrency_key IS NULL
              AND j.priority < $8
            ORDER BY j.priority DESC, j.available_at, j.id
            LIMIT 1
        ) AS below_front
        LIMIT 1
    ) AS f
    UNION ALL
    SELECT n.priority, n.available_at, '-infinity'::timestamptz, '-9223372036854775808'::bigint
    FROM oldest o
    CROSS JOIN LATERAL (
        SELECT j.priority, j.available_at
        FROM jq_live_jobs j
        WHERE j.queue_id = $6
          AND j.status OPERATOR(pg_catalog.=) 'pending'
          AND j.awaiting = 0 AND j.concurrency_key IS NULL
          AND j.priority < o.priority
        ORDER BY j.priority DESC, j.available_at, j.id
        LIMIT 1
    ) AS n
), starving AS (
    -- Fairness first: the jobs that waited past the starvation limit, oldest first, whatever their
    -- priority (guide, "Fairness"). Each priority whose oldest job starves gives its oldest
    -- starving jobs, and the oldest of those are taken; when none starves, which is the usual
    -- case, this reads only the probes above, and the sort has nothing to sort. When the pending
    -- jobs have one priority, claim order is already oldest first, and the starving jobs are left
    -- to it: a backlog that waited past the limit then costs no more than a fresh one, and
    -- claimers do not all reach for the same oldest jobs before they skip to claim order.
    SELECT c.ctid
    FROM oldest o
    CROSS JOIN LATERAL (
        SELECT j.ctid, j.available_at, j.id
        FROM jq_live_jobs j
        WHERE j.queue_id = $6
          AND j.status OPERATOR(pg_catalog.=) 'pending'
          AND j.awaiting = 0 AND j.concurrency_key IS NULL
          AND j.priority >= o.priority AND j.priority <= o.priority
          AND (j.available_at, j.id) >= (o.from_at, o.from_id)
          AND j.available_at <= coalesce($5 - $12, '-infinity')
          AND (j.expires_at IS NULL OR j.expires_at > $5)
          -- ordering key check
        ORDER BY j.priority DESC, j.available_at, j.id
        LIMIT $4
    ) AS c
    WHERE o.available_at <= coalesce($5 - $12, '-infinity')
      AND EXISTS (SELECT 1 FROM oldest p WHERE p.priority <> o.priority)
    ORDER BY c.available_at, c.id
    LIMIT $4
),
-- fairness: end
picked AS (
-- fairness: begin
    -- The starving jobs, then claim order among the rest. UNION ALL runs its branches in order and
    -- LIMIT stops it, so a later branch locks rows only when the ones before did not fill the
    -- batch. The branches may overlap (a starving job is also in claim order); a later one returns
    -- such a row again, already locked by this statement, and `ctid = ANY(...)` below updates it
    -- once. Excluding starving jobs from the later branches instead would make the planner expect a
    -- narrow range there and sort.
    SELECT ctid FROM (
        -- Locked by ctid, skipping those another claimer holds; the conditions are checked again
        -- here, on the version locked.
        SELECT j.ctid
        FROM jq_live_jobs j
        WHERE j.ctid = ANY (ARRAY(SELECT ctid FROM starving))
          AND j.queue_id = $6
          AND j.status OPERATOR(pg_catalog.=) 'pending'
          AND j.awaiting = 0 AND j.concurrency_key IS NULL
          AND j.available_at <= coalesce($5 - $12, '-infinity')
          AND (j.expires_at IS NULL OR j.expires_at > $5)
          -- ordering key check
        FOR UPDATE OF j SKIP LOCKED
    ) AS starving
    UNION ALL
-- fairness: end
    -- Claim order from the claim front ($8, $9, $10: priority, available_at, id; see
    -- src/shared/front.rs): first the rest of the front's priority, from the front on, then every
    -- lower priority. Nothing claimable is above the front, so together they are the whole claim
    -- order; the front (2147483647, '-infinity', minimum) is the start of it, where a queue without
    -- one starts. Both are ranges of the claim index, so the entries of jobs claimed before the
    -- front are never visited, though a snapshot older than their claims keeps them in the index.
    SELECT ctid FROM (
        SELECT j.ctid
        FROM jq_live_jobs j
        WHERE j.queue_id = $6
          AND j.status OPERATOR(pg_catalog.=) 'pending'
          AND j.awaiting = 0 AND j.concurrency_key IS NULL
          -- Not `priority = $8`: the planner would drop a constant from the ORDER BY and might
          -- then sort; a closed range keeps the index order.
          AND j.priority >= $8 AND j.priority <= $8
          AND (j.available_at, j.id) >= ($9, $10)
          AND j.available_at <= $5
          AND (j.expires_at IS NULL OR j.expires_at > $5)
          -- ordering key check
        ORDER BY j.priority DESC, j.available_at, j.id
        LIMIT $4
        FOR UPDATE OF j SKIP LOCKED
    ) AS at_front
-- priorities: begin
    UNION ALL
    SELECT ctid FROM (
        SELECT j.ctid
        FROM jq_live_jobs j
        WHERE j.queue_id = $6
          AND j.status OPERATOR(pg_catalog.=) 'pending'
          AND j.awaiting = 0 AND j.concurrency_key IS NULL
          AND j.priority < $8
          AND j.available_at <= $5
          AND (j.expires_at IS NULL OR j.expires_at > $5)
          -- ordering key check
        ORDER BY j.priority DESC, j.available_at, j.id
        LIMIT $4
        FOR UPDATE OF j SKIP LOCKED
    ) AS below_front
-- priorities: end
    LIMIT $4
