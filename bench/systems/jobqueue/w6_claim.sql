SELECT coalesce(max(id), 0) AS job FROM jq_claim('bench', 'bench-' || :client_id, '1 hour') \gset
