#!/usr/bin/env bash
# What a workflow costs a job, in one session, without the noise of a shared machine. One server
# (make bench's settings, synchronous_commit off), two queues filled alike: `dagq` in units of
# W13's shape (bench/systems/jobqueue/fill_dag.sql: one job, 100 that depend on it, one that depends
# on those 100) and `plainq` with as many jobs without dependencies. One PL/pgSQL procedure
# (bench/systems/jobqueue/turns.sql, run by bench/turns.sh) then claims and completes a job of
# `dagq`, commits, does the same for `plainq`, and so on to the end, adding up the time of each
# side. The two sides take turns job by job, so whatever slows the machine slows both alike, and
# the ratio repeats where separate runs do not. It measures the server alone: no client, no
# network, one backend.
#   bench/dag_cost.sh [units of 102 jobs] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
UNITS=${1:-100}
ROUNDS=${2:-3}
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-dag
PORT=${BENCH_PORT:-55499}
LABEL=DAG
. bench/turns.sh

for round in $(seq 1 "$ROUNDS"); do
  psql -X -q -v ON_ERROR_STOP=1 -v units="$UNITS" <<'SQL'
-- DELETE, not TRUNCATE: the background worker may hold a lock on a table of the history.
DELETE FROM jq_job_history;
DELETE FROM jq_job_events;
SELECT set_config('bench.units', :'units', false) AS units \gset
DO $$
DECLARE
    root bigint;
    fanned bigint[];
BEGIN
    FOR unit IN 1 .. current_setting('bench.units')::int LOOP
        root := jq_enqueue('dagq', jsonb_build_object('n', unit));
        fanned := ARRAY(SELECT jq_enqueue_batch('dagq', array_fill(jsonb_build_object('n', unit), ARRAY[100]),
                                                depends_on => ARRAY[root]));
        PERFORM jq_enqueue('dagq', jsonb_build_object('n', unit), depends_on => fanned);
        PERFORM jq_enqueue_batch('plainq', array_fill(jsonb_build_object('n', unit), ARRAY[102]));
    END LOOP;
END
$$;
VACUUM ANALYZE;
CHECKPOINT;
SQL
  turns_round "$round" dagq
done
turns_median
