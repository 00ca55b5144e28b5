-- $1 job_id, $2 what it depends on (bigint[]), $3 for each of $2, whether it has ended (boolean[],
-- pairwise)
-- A re-driven job's rows of jq_job_dependencies (guide, "Workflows"): settled for a dependency its
-- new count leaves out, and not for one it waits for, whose end then counts it down. Run before the
-- count (dependencies_await.sql), so that the re-drive locks these rows before the job's parts, as
-- a completion does (dependencies_settle.sql, then dependencies_count_parts.sql): a completion that
-- is settling one of them right now is waited for, not the other way round. A dependency seen
-- running here that has ended once this commits is settled by the reap pass.
UPDATE jq_job_dependencies d
SET settled = g.settled
FROM ROWS FROM (pg_catalog.unnest($2::bigint[]), pg_catalog.unnest($3::boolean[])) AS g(depends_on, settled)
WHERE d.depends_on = g.depends_on
  AND d.job_id = $1
