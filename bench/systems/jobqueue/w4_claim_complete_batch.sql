SELECT coalesce(array_agg(id), '{}') AS jobs, coalesce(array_agg(lease_token), '{}') AS tokens
FROM jq_claim('bench', 'bench-' || :client_id, NULL, :batch) \gset
SELECT count(*) FROM jq_complete_batch(:jobs::bigint[], 'bench-' || :client_id, :tokens::bigint[]);
