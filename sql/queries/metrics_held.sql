-- jq_metrics' flow control gauges: per queue of jq_queue_stats, the claimable jobs each limit holds
-- back now (guide, "Flow control"), and those a pause holds back.
SELECT s.queue_name, s.held_by_concurrency_limit, s.held_by_key_limit, s.held_by_rate_limit,
       s.held_by_key_rate_limit, s.held_by_pause
FROM jq_queue_stats s
ORDER BY s.queue_name
