TRUNCATE pgmq.q_bench, pgmq.a_bench;
