-- $1 now
-- No job can be due for pruning unless it finished before now minus the shortest retention in force
-- (a queue without a settings row has 7 days). Passed to prune.sql as a plain value, it lets the
-- plan read only that range of jq_jobs_finished.
SELECT $1::timestamptz - least(interval '7 days', pg_catalog.min(q.retention)) FROM jq_queues q
