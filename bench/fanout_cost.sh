#!/usr/bin/env bash
# What a completion costs with many jobs waiting on it (guide, "Workflows", "What it costs"), in
# one session, without the noise of a shared machine. One server (make bench's settings,
# synchronous_commit off) and three queues: `fanq`, whose jobs each have DEPENDENTS jobs of
# `fankids` waiting on them; `noneq`, with as many jobs that nothing waits on; and `plainq`, the
# other side of the turns. The procedure of bench/systems/jobqueue/turns.sql (run by bench/turns.sh)
# claims and completes a job of one queue, commits, does the same for `plainq`, and so on to the
# end, adding up the time of each side: first `fanq` against `plainq`, then `noneq` against
# `plainq`. The figure is fan against none, drained the same way in the same round: 1.0 means a
# completion costs the same with DEPENDENTS jobs waiting on it as with none. Each drain runs in a
# session warmed up on one job of its kind first.
#
# With pg_jobqueue.dependents_per_job at its default (the completion releases that many, the woken
# worker the rest), at 1 and at 0 (the worker releases all or all but one), and at DEPENDENTS (the
# completion releases them all itself, as before the setting).
#   bench/fanout_cost.sh [jobs of fanq] [dependents each] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
UNITS=${1:-20}
DEPENDENTS=${2:-30000}
ROUNDS=${3:-3}
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-fanout
PORT=${BENCH_PORT:-55498}
LABEL=side
. bench/turns.sh

fill() {
  # The worker releases what the round before left it first: it would slow this round's drains.
  until [ "$(psql -X -At -c "SELECT count(*) FROM jq_job_dependencies WHERE NOT settled")" = 0 ]; do sleep 0.5; done
  psql -X -q -v ON_ERROR_STOP=1 -v units="$UNITS" -v dependents="$DEPENDENTS" <<'SQL'
-- DELETE, not TRUNCATE: the background worker may hold a lock on a table of the history.
DELETE FROM jq_job_history;
DELETE FROM jq_job_events;
DELETE FROM jq_job_dependencies;
DELETE FROM jq_live_jobs;
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
        PERFORM jq_enqueue('noneq', jsonb_build_object('n', unit));
        PERFORM jq_enqueue_batch('plainq', array_fill(jsonb_build_object('n', unit), ARRAY[2]));
    END LOOP;
    -- One job of each kind for the session to warm up on (its plans and caches), before it is timed.
    parent := jq_enqueue('fanq_warm', '{}');
    PERFORM jq_enqueue_batch('fankids', array_fill('{}'::jsonb, ARRAY[10]), depends_on => ARRAY[parent]);
    PERFORM jq_enqueue('noneq_warm', '{}');
    PERFORM jq_enqueue_batch('plainq', array_fill('{}'::jsonb, ARRAY[2]));
END
$$;
VACUUM ANALYZE;
CHECKPOINT;
SQL
}

# warm_round ROUND QUEUE: as turns_round (bench/turns.sh), in a session that first drains the
# queue's one warm-up job: a session's first calls make its plans, which twenty jobs would not
# hide, and only the side with dependents makes the plans of the workflow statements.
warm_round() {
  psql -X -q -v ON_ERROR_STOP=1 -c "CALL bench_drain(0, '${2}_warm')" -c "CALL bench_drain($1, '$2')" \
    -c "DELETE FROM bench_turns WHERE round = 0"
  psql -X -At -F ' ' -c "SELECT round, jobs, round(side_us::numeric, 1), round(plain_us::numeric, 1)
                         FROM bench_turns WHERE round = $1" |
    awk -v side="$LABEL" '{ printf "round %d  %d jobs  %s %7.1f us/job  plain %7.1f us/job\n", $1, $2, side, $3, $4 }'
}

# Rounds are numbered setting * 100 + round for `fanq`, and 50 more for `noneq`.
setting_number=0
for setting in DEFAULT 1 0 "$DEPENDENTS"; do
  setting_number=$((setting_number + 1))
  if [ "$setting" = DEFAULT ]; then
    psql -X -q -v ON_ERROR_STOP=1 -c "ALTER DATABASE postgres RESET pg_jobqueue.dependents_per_job"
  else
    psql -X -q -v ON_ERROR_STOP=1 -c "ALTER DATABASE postgres SET pg_jobqueue.dependents_per_job = $setting"
  fi
  for round in $(seq 1 "$ROUNDS"); do
    fill
    LABEL=fan warm_round $((setting_number * 100 + round)) fanq
    LABEL=none warm_round $((setting_number * 100 + 50 + round)) noneq
  done
done
psql -X -At -v dependents="$DEPENDENTS" <<'SQL'
WITH runs AS (
    SELECT round / 100 AS setting, round % 100 >= 50 AS none, side_us FROM bench_turns
)
SELECT 'dependents_per_job ' || (ARRAY['default', '1', '0', :'dependents'])[setting]
       || ': median claim and completion of a job with ' || :'dependents' || ' waiting on it '
       || round(percentile_disc(0.5) WITHIN GROUP (ORDER BY side_us) FILTER (WHERE NOT none)::numeric, 1)
       || ' us, with none ' || round(percentile_disc(0.5) WITHIN GROUP (ORDER BY side_us) FILTER (WHERE none)::numeric, 1)
       || ' us: none/fan ' || round((percentile_disc(0.5) WITHIN GROUP (ORDER BY side_us) FILTER (WHERE none)
                                     / percentile_disc(0.5) WITHIN GROUP (ORDER BY side_us) FILTER (WHERE NOT none))::numeric, 3)
FROM runs GROUP BY setting ORDER BY setting;
SQL
