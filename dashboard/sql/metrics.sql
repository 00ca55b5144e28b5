-- The Prometheus exposition of the queues the role may see.
SELECT jq_metrics()
