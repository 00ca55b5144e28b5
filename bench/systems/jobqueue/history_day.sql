-- The day partition of the history :days_ago days back (UTC), made as jq_prune makes the coming
-- days (sql/queries/history_days_missing.sql), for W10's expired day.
SELECT format('CREATE TABLE %1$I (LIKE jq_job_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
               CREATE INDEX %2$I ON %1$I (id);
               CREATE INDEX %3$I ON %1$I (queue_id, finished_at);
               ALTER TABLE jq_job_history ATTACH PARTITION %1$I FOR VALUES FROM (%4$L) TO (%5$L)',
              'jq_job_history_' || to_char(d, 'YYYYMMDD'), 'jq_job_history_' || to_char(d, 'YYYYMMDD') || '_id',
              'jq_job_history_' || to_char(d, 'YYYYMMDD') || '_queue',
              d AT TIME ZONE 'UTC', (d AT TIME ZONE 'UTC') + interval '24 hours')
FROM (SELECT date_trunc('day', now() AT TIME ZONE 'UTC') - make_interval(days => :days_ago) AS d) AS s
\gexec
