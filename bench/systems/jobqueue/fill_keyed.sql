SELECT count(*) FROM generate_series(1, 1000) AS k,
     LATERAL jq_enqueue_batch('bench', array_fill(jsonb_build_object('n', k), ARRAY[greatest(:fill / 1000, 1)]),
                              concurrency_key => 'tenant-' || k);
