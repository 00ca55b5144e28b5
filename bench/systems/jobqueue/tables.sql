SELECT 'jq_jobs'::regclass UNION ALL SELECT 'jq_job_events'::regclass;
