-- $1 job id. The jobs it depends on, in the order it named them (guide, "Workflows").
SELECT p.job_id, p.status::text, p.result::text
FROM jq_parent_results($1) p
