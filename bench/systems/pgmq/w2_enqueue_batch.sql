SELECT count(*) FROM pgmq.send_batch('bench', array_fill('{"n": 1}'::jsonb, ARRAY[:batch::int]));
