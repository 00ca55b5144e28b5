#!/usr/bin/env bash
# What a completion costs with many jobs waiting on it (guide, "Workflows", "What it costs"), in
# one session, without the noise of a shared machine. One server (make bench's settings,
# synchronous_commit off), two queues: `fanq`, whose jobs each have DEPENDENTS jobs of `fankids`
# waiting on them, and `plainq`, with as many jobs that nothing waits on. The procedure of
# bench/systems/jobqueue/turns.sql (run by bench/turns.sh) claims and completes a job of `fanq`,
# commits, does the same for `plainq`, and so on to the end, adding up the time of each side.
# First with pg_jobqueue.dependents_per_job at its default (the completion releases that many, the
# reap pass the rest), then set to DEPENDENTS (the completion releases them all itself), for
# comparison. Prints each round and the median of plain/fan per setting: 1.0 means a completion
# costs the same with DEPENDENTS jobs waiting on it as with none.
#   bench/fanout_cost.sh [jobs of fanq] [dependents each] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
UNITS=${1:-5}
DEPENDENTS=${2:-30000}
ROUNDS=${3:-3}
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-fanout
PORT=${BENCH_PORT:-55498}
LABEL=fan
. bench/turns.sh

fill() {
  psql -X -q -v ON_ERROR_STOP=1 -v units="$UNITS" -v dependents="$DEPENDENTS" <<'SQL'
-- DELETE, not TRUNCATE: the background worker may hold a lock on a table of the history.
DELETE FROM jq_job_history;
DELETE FROM jq_job_events;
DELETE FROM jq_live_jobs;
DELETE FROM jq_job_dependencies;
SELECT set_config('bench.units', :'units', false) AS units \gset
SELECT set_config('bench.dependents', :'dependents', false) AS dependents \gset
SET pg_jobqueue.max_batch_size = 1000000;
DO $$
DECLARE
    parent bigint;
BEGIN
    FOR unit IN 1 .. current_setting('bench.units')::int LOOP
        parent := jq_enqueue('fanq', jsonb_build_object('n', unit));
        PERFORM jq_enqueue_batch('fankids', array_fill(jsonb_build_object('n', unit),
                                                       ARRAY[current_setting('bench.dependents')::int]),
                                 depends_on => ARRAY[parent]);
        PERFORM jq_enqueue('plainq', jsonb_build_object('n', unit));
    END LOOP;
END
$$;
VACUUM ANALYZE;
CHECKPOINT;
SQL
}

for round in $(seq 1 "$ROUNDS"); do
  fill
  turns_round "$round" fanq
done
psql -X -q -v ON_ERROR_STOP=1 -c "ALTER DATABASE postgres SET pg_jobqueue.dependents_per_job = $DEPENDENTS"
for round in $(seq $((ROUNDS + 1)) $((2 * ROUNDS))); do
  fill
  turns_round "$round" fanq
done
psql -X -At -v rounds="$ROUNDS" -v dependents="$DEPENDENTS" <<'SQL'
SELECT CASE WHEN round <= :rounds THEN 'dependents_per_job default' ELSE 'dependents_per_job ' || :dependents END
       || ': median of ' || count(*) || ' rounds: fan ' || round(percentile_disc(0.5) WITHIN GROUP (ORDER BY side_us)::numeric, 1)
       || ' us/job, plain ' || round(percentile_disc(0.5) WITHIN GROUP (ORDER BY plain_us)::numeric, 1)
       || ' us/job, plain/fan ' || round(percentile_disc(0.5) WITHIN GROUP (ORDER BY plain_us / side_us)::numeric, 3)
FROM bench_turns GROUP BY round <= :rounds ORDER BY min(round);
SQL
