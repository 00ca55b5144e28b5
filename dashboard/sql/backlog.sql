-- What the sampler keeps of each visible queue's backlog for the charts.
SELECT s.queue_name, s.pending, s.scheduled, s.running, s.dead
FROM jq_queue_stats s
