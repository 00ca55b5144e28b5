SELECT coalesce(max(id), 0) AS job, coalesce(max(lease_token), 0) AS token
FROM jq_claim('bench', 'bench-' || :client_id) \gset
SELECT jq_complete(:job, 'bench-' || :client_id, :token);
