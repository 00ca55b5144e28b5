SELECT count(*) FROM jobs WHERE status = 'pending';
