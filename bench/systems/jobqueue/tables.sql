SELECT 'jq_live_jobs'::regclass UNION ALL SELECT 'jq_job_events'::regclass
UNION ALL SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'jq_job_history'::regclass;
