SELECT 'pgmq.q_bench'::regclass UNION ALL SELECT 'pgmq.a_bench'::regclass;
