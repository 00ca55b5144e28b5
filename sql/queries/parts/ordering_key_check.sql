-- The ordering-key check (guide, "jq_enqueue": `ordering_key`): a job with an ordering key waits while another
-- job of its key runs or an earlier one is pending. The one copy of it: each claim statement has,
-- where it walks pending jobs `j`, the line `-- ordering key check`, which src/api/claim/take.rs
-- replaces with this condition, or, for a queue that has never had a job with an ordering key,
-- with `AND j.ordering_key IS NULL`, which costs no plan node.
AND (j.ordering_key IS NULL OR NOT EXISTS (
      SELECT 1 FROM jq_live_jobs k
      WHERE k.queue_id = j.queue_id AND k.ordering_key = j.ordering_key
        AND k.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[]) AND k.id <> j.id
        AND (k.status OPERATOR(pg_catalog.=) 'running' OR k.id < j.id)))
