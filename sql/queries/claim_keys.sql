-- $1 queue_name, $2 the key to go on after ('': from the first; a key is never empty), $3 how many,
-- $4 whether the queue has had jobs of more than one priority (jq_queue_ids.priorities), $5
-- whether it has rows in jq_key_settings (as src/api/settings.rs keeps both)
-- The next concurrency keys of the queue that have pending jobs, in key order after $2: where the
-- key rotation goes next (src/api/keys.rs; guide, "Flow control"). One probe of the key claim
-- index each, a skip scan: the first entry after the key before. A key's jobs may all be scheduled
-- later, or its running jobs at its limit; the claim (claim_keyed.sql) decides. Each with its
-- weight in the rotation (jq_key_settings; 1 without a row, and for every key of a queue without
-- rows there, `$5` false, without the look-up), and whether its pending jobs have
-- more than one priority (its first and its last in claim order, two probes): only then can a
-- starving job of the key be anywhere but first in claim order. A queue that has only had jobs of
-- priority 0 has no key with two (`$4` false): then the probes, which took about half of this
-- statement's time, are not made (a CASE, whose branch not taken is not run).
WITH RECURSIVE queue AS (
    SELECT n.queue_id AS id FROM jq_queue_ids n WHERE n.queue_name = $1
), keys AS (
    SELECT f.concurrency_key, 1 AS n
    FROM (
        SELECT j.concurrency_key
        FROM jq_live_jobs j
        WHERE j.queue_id = (SELECT id FROM queue)
          AND j.status OPERATOR(pg_catalog.=) 'pending'
          AND j.awaiting = 0 AND j.concurrency_key IS NOT NULL
          AND j.concurrency_key > $2
        ORDER BY j.concurrency_key
        LIMIT 1
    ) AS f
    UNION ALL
    SELECT x.concurrency_key, k.n + 1
    FROM keys k
    CROSS JOIN LATERAL (
        SELECT j.concurrency_key
        FROM jq_live_jobs j
        WHERE j.queue_id = (SELECT id FROM queue)
          AND j.status OPERATOR(pg_catalog.=) 'pending'
          AND j.awaiting = 0 AND j.concurrency_key IS NOT NULL
          AND j.concurrency_key > k.concurrency_key
        ORDER BY j.concurrency_key
        LIMIT 1
    ) AS x
    WHERE k.n < $3
)
-- In the order the recursion found them, which a scan of its result keeps (an ORDER BY would sort).
SELECT k.concurrency_key,
       CASE WHEN $5 THEN coalesce((SELECT s.weight FROM jq_key_settings s
                                   WHERE s.queue_name = $1 AND s.concurrency_key = k.concurrency_key), 1)
            ELSE 1 END,
       CASE WHEN $4 THEN coalesce((SELECT j.priority FROM jq_live_jobs j
                 WHERE j.queue_id = (SELECT id FROM queue) AND j.concurrency_key = k.concurrency_key
                   AND j.status OPERATOR(pg_catalog.=) 'pending' AND j.awaiting = 0 AND j.concurrency_key IS NOT NULL
                 ORDER BY j.priority DESC, j.available_at, j.id LIMIT 1)
                <> (SELECT j.priority FROM jq_live_jobs j
                    WHERE j.queue_id = (SELECT id FROM queue) AND j.concurrency_key = k.concurrency_key
                      AND j.status OPERATOR(pg_catalog.=) 'pending' AND j.awaiting = 0 AND j.concurrency_key IS NOT NULL
                    ORDER BY j.priority, j.available_at DESC, j.id DESC LIMIT 1), false) ELSE false END
FROM keys k
