SELECT coalesce(max(msg_id), 0) AS job FROM pgmq.read('bench', 30, 1) \gset
