-- $1 job_id
-- The jobs this one depends on, in the order it named them, each with its status and result (NULL
-- until it succeeds; always NULL in a queue that keeps nothing). A dependency no longer kept (pruned
-- or purged once this job ended) is left out.
SELECT d.id, j.status, j.result
FROM (SELECT j.depends_on FROM jq_live_jobs j WHERE j.id = $1
      UNION ALL
      SELECT h.depends_on FROM jq_job_history h WHERE h.id = $1) AS me
CROSS JOIN LATERAL pg_catalog.unnest(me.depends_on) WITH ORDINALITY AS d(id, ord)
JOIN jq_jobs j ON j.id = d.id
ORDER BY d.ord
