-- The counters the sampler keeps (every visible queue), and the claim latency: waiting time from
-- available_at to the claim, over the last five minutes (guide, "Operating"). No rows without
-- the library preloaded.
SELECT c.queue_name, c.claims, c.completions, c.wait_p50_seconds, c.wait_p99_seconds
FROM jq_queue_counters() c
