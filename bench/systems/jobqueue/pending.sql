SELECT count(*) FROM jq_live_jobs WHERE status = 'pending';
