SELECT count(*) FROM jq_enqueue_batch('bench', array_fill('{"n": 1}'::jsonb, ARRAY[:batch::int]));
