SELECT count(*) FROM jq_jobs WHERE status = 'pending';
