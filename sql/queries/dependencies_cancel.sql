-- $1 jobs (bigint[]), $2 the dependency each one fails by (bigint[], pairwise), $3 now
-- Cancels each of these jobs that is still pending, DEPENDENCY_FAILED, with its audit row naming the
-- dependency and how that ended (guide, "Workflows"). Returns those cancelled that have dependents
-- of their own still to settle, for the next round (src/api/dependencies.rs).
WITH given AS (
    SELECT DISTINCT ON (g.job_id) g.job_id, g.cause
    FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::bigint[])) AS g(job_id, cause)
    ORDER BY g.job_id, g.cause
), causes AS (
    SELECT g.job_id, g.cause,
           'depends on job ' || g.cause::text ||
           coalesce(', which ended ' ||
                    (SELECT CASE WHEN p.last_error_code = 'EXPIRED' AND p.status OPERATOR(pg_catalog.=) 'cancelled'
                                 THEN 'expired' ELSE p.status::text END
                     FROM jq_live_jobs p WHERE p.id = g.cause),
                    -- Purged or pruned since: whether it succeeded is not known any more.
                    ', which is no longer kept') AS message
    FROM given g
), locked AS MATERIALIZED (
    -- Locked in the order of their ids first, as dependencies_release.sql says why; only those
    -- still pending, as there: a purge or prune of a job already cancelled holds its row and then
    -- deletes its rows of jq_job_dependencies, which this statement's caller settled first, and the
    -- two would each wait for the other (a deadlock).
    SELECT j.id FROM jq_live_jobs j
    WHERE j.id = ANY (ARRAY(SELECT c.job_id FROM causes c))
      AND j.status OPERATOR(pg_catalog.=) 'pending'
    ORDER BY j.id
    FOR UPDATE OF j
), cancelled AS (
    UPDATE jq_live_jobs j
    SET status = 'cancelled',
        -- It waits for nothing any more; a re-drive counts again (dependencies_await.sql).
        awaiting = 0,
        finished_at = $3,
        last_error_code = 'DEPENDENCY_FAILED',
        last_error_message = c.message
    FROM causes c
    WHERE j.id = ANY (ARRAY(SELECT l.id FROM locked l))
      AND j.id = c.job_id
      AND j.status OPERATOR(pg_catalog.=) 'pending'
    RETURNING j.id, (SELECT n.queue_name FROM jq_queue_ids n WHERE n.queue_id = j.queue_id) AS queue_name,
              j.attempt_count, j.lease_token,
              EXISTS (SELECT FROM jq_job_dependencies x WHERE x.depends_on = j.id AND NOT x.settled) AS dependents,
              c.message
), logged AS (
    INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, lease_token, error_code, error_message)
    SELECT c.id, c.queue_name, 'cancelled', 'cancelled', $3, c.attempt_count, c.lease_token, 'DEPENDENCY_FAILED',
           c.message
    FROM cancelled c
)
SELECT c.id, c.queue_name, c.dependents FROM cancelled c
