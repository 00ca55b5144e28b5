-- $1 the most dependencies to look at, $2 look at those above this id only (0: from the first)
-- The reap pass's share of workflows (guide, "Workflows"): jobs that have ended (succeeded, dead,
-- cancelled, or no longer kept) while rows of jq_job_dependencies still wait on them. A completion,
-- death or cancel settles at most pg_jobqueue.dependents_per_job rows itself per job it ends, and
-- none that an enqueue still open when it ended had made: this finds the rest, and
-- src/api/dependencies.rs settles them as the ending call would have.
--
-- The dependencies with unsettled rows are read one by one in the order of their ids, each by one
-- probe of the index of unsettled rows (a loose index scan), from where the last pass stopped: a
-- fan-out of 30,000 waiting on one job costs one probe, not 30,000 rows. Returns each ended one
-- (`ended`), whether it succeeded, and the last one looked at whether it ended or not, each row
-- with how many were looked at: fewer than $1, and the next pass starts from the first again.
WITH RECURSIVE walk(depends_on, n) AS (
    (SELECT d.depends_on, 1 FROM jq_job_dependencies d
     WHERE NOT d.settled AND d.depends_on > $2
     ORDER BY d.depends_on LIMIT 1)
    UNION ALL
    SELECT (SELECT d.depends_on FROM jq_job_dependencies d
            WHERE NOT d.settled AND d.depends_on > w.depends_on
            ORDER BY d.depends_on LIMIT 1),
           w.n + 1
    FROM walk w
    WHERE w.depends_on IS NOT NULL AND w.n < $1
), looked AS MATERIALIZED (
    SELECT w.depends_on,
           NOT EXISTS (SELECT FROM jq_live_jobs j
                       WHERE j.id = w.depends_on
                         AND j.status OPERATOR(pg_catalog.=) ANY (ARRAY['pending', 'running']::jq_status[])) AS ended
    FROM walk w
    WHERE w.depends_on IS NOT NULL
)
SELECT l.depends_on, l.ended,
       l.ended AND EXISTS (SELECT FROM jq_job_history h WHERE h.id = l.depends_on) AS succeeded,
       (SELECT pg_catalog.count(*) FROM looked)::int AS looked
FROM looked l
WHERE l.ended OR l.depends_on = (SELECT pg_catalog.max(m.depends_on) FROM looked m)
