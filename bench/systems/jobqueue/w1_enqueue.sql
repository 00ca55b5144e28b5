SELECT jq_enqueue('bench', '{"n": 1}');
