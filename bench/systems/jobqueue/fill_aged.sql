-- W3 on a backlog that waited past the queue's starvation limit (5 minutes) before the run, as a
-- queue does whose jobs were enqueued some minutes before its workers start: every job starves.
SELECT count(*) FROM generate_series(1, :fill / 1000) AS chunk,
     LATERAL jq_enqueue_batch('bench', array_fill(jsonb_build_object('n', chunk), ARRAY[1000]),
                              run_at => now() - interval '10 minutes');
