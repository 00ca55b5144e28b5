-- jq_metrics' flow control gauges: per queue of jq_queue_stats, the claimable jobs each limit holds
-- back now (guide, "Flow control"), those a pause holds back, and those waiting for a dependency
-- (guide, "Workflows").
SELECT s.queue_name, s.held_by_concurrency_limit, s.held_by_key_limit, s.held_by_rate_limit,
       s.held_by_key_rate_limit, s.held_by_pause, s.held_by_dependency
FROM jq_queue_stats s
ORDER BY s.queue_name
