SELECT pgmq.send('bench', '{"n": 1}');
