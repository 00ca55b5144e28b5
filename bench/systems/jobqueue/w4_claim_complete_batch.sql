SELECT coalesce(array_agg(id), '{}') AS jobs, coalesce(array_agg(lease_token), '{}') AS tokens
FROM jq_claim('bench', 'bench-' || :client_id, NULL, :batch) \gset
SELECT count(*) FILTER (WHERE done)
FROM unnest(:jobs::bigint[], :tokens::bigint[]) AS claimed(job, token),
     LATERAL jq_complete(job, 'bench-' || :client_id, token) AS done;
