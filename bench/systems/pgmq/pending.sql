SELECT count(*) FROM pgmq.q_bench WHERE vt <= clock_timestamp();
