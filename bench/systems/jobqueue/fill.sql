SELECT count(*) FROM generate_series(1, :fill / 1000) AS chunk,
     LATERAL jq_enqueue_batch('bench', array_fill(jsonb_build_object('n', chunk), ARRAY[1000]));
