SELECT coalesce(array_agg(msg_id), '{}') AS jobs FROM pgmq.read('bench', 30, :batch) \gset
SELECT count(*) FROM pgmq.delete('bench', :jobs::bigint[]);
