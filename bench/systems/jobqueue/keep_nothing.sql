-- W3 on a queue that keeps no succeeded job (guide, "Queues that keep nothing"): a completion
-- deletes its job, as the classic SKIP LOCKED queue does.
SELECT jq_configure('bench', '{"keep_succeeded": false}') IS NOT NULL;
