-- W11: the bench queue's jobs spread over 1,000 concurrency keys (fill_keyed.sql), at most one
-- running per key.
SELECT jq_configure('bench', '{"key_concurrency_limit": 1}') IS NOT NULL;
