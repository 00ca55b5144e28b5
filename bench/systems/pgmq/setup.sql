-- pgmq's own install script (fetched by bench/fetch_pgmq.sh) runs first; then one queue.
SELECT pgmq.create('bench');
