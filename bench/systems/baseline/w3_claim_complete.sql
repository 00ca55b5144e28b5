WITH claimed AS (
    UPDATE jobs SET status = 'running', locked_by = 'bench-' || :client_id, locked_at = now()
    WHERE id = (SELECT id FROM jobs WHERE status = 'pending' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING id, payload
)
SELECT coalesce(max(id), 0) AS job FROM claimed \gset
DELETE FROM jobs WHERE id = :job;
