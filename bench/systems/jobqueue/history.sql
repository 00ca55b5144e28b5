-- :rows succeeded jobs of the bench queue in the history, finished :age ago (W9, W10): written as
-- completions would leave them, without running a million completions first.
INSERT INTO jq_queue_ids (queue_name) VALUES ('bench') ON CONFLICT DO NOTHING;
INSERT INTO jq_job_history (id, queue_id, payload, priority, available_at, attempt_count, max_attempts,
                            lease_token, claimed_at, created_at, finished_at)
SELECT nextval('jq_jobs_id_seq'), q.queue_id, jsonb_build_object('n', i), 0, t.f, 1, 8, 1, t.f, t.f, t.f
FROM jq_queue_ids q, generate_series(1, :rows) AS i, (SELECT now() - :'age'::interval AS f) AS t
WHERE q.queue_name = 'bench';
