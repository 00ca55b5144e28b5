SELECT 'jobs'::regclass;
