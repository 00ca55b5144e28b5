-- $1 job_id
-- The jobs this one depends on, in the order it named them, each with its status and result (NULL
-- until it succeeds; a queue that keeps nothing keeps a job others depend on, with its result). A
-- dependency no longer kept (pruned or purged once this job ended) is left out. Each is looked up by its id, in the hot table and
-- then in the history (by each day's index on id), rather than through jq_jobs, whose join the
-- planner would not take apart for a list of ids.
SELECT d.id, j.status, j.result
FROM (SELECT l.depends_on FROM jq_live_jobs l WHERE l.id = $1
      UNION ALL
      SELECT h.depends_on FROM jq_job_history h WHERE h.id = $1
      LIMIT 1) AS me
CROSS JOIN LATERAL pg_catalog.unnest(me.depends_on) WITH ORDINALITY AS d(id, ord)
CROSS JOIN LATERAL (
    SELECT l.status, NULL::jsonb AS result FROM jq_live_jobs l WHERE l.id = d.id
    UNION ALL
    SELECT 'succeeded'::jq_status, h.result FROM jq_job_history h WHERE h.id = d.id
    LIMIT 1
) AS j
ORDER BY d.ord
