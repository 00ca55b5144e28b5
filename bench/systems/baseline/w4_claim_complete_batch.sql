WITH claimed AS (
    UPDATE jobs SET status = 'running', locked_by = 'bench-' || :client_id, locked_at = now()
    WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT :batch FOR UPDATE SKIP LOCKED)
    RETURNING id, payload
)
SELECT coalesce(array_agg(id), '{}') AS jobs FROM claimed \gset
DELETE FROM jobs WHERE id = ANY (:jobs::bigint[]);
