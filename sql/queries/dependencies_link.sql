-- $1 the new jobs' ids (bigint[]), $2 what each depends on (bigint[]), $3 for jobs with more than
-- 16 dependencies, what each of their parts waits for (int[], part 0 first; empty otherwise), $4
-- for each of $2, whether it had already ended (boolean[], pairwise): the job's count leaves it
-- out, so its row is settled from the start
-- One row per new job and dependency (sql/schema/tables.sql, jq_job_dependencies), and one per new
-- job and part (jq_dependency_parts).
WITH linked AS (
    INSERT INTO jq_job_dependencies (depends_on, job_id, parted, settled)
    SELECT d.depends_on, j.job_id, pg_catalog.cardinality($3::int[]) > 0, d.settled
    FROM pg_catalog.unnest($1::bigint[]) AS j(job_id)
    CROSS JOIN ROWS FROM (pg_catalog.unnest($2::bigint[]), pg_catalog.unnest($4::boolean[])) AS d(depends_on, settled)
)
INSERT INTO jq_dependency_parts (job_id, part, awaiting)
SELECT j.job_id, (c.n - 1)::int, c.awaiting
FROM pg_catalog.unnest($1::bigint[]) AS j(job_id)
CROSS JOIN pg_catalog.unnest($3::int[]) WITH ORDINALITY AS c(awaiting, n)
