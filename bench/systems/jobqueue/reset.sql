TRUNCATE jq_live_jobs, jq_job_history, jq_job_events, jq_job_dependencies, jq_dependency_parts;
