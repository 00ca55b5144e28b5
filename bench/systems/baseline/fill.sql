INSERT INTO jobs (payload) SELECT '{"n": 1}' FROM generate_series(1, :fill);
