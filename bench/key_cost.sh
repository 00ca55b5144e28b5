#!/usr/bin/env bash
# What a concurrency key costs a job, in one session, without the noise of a shared machine. One
# server (make bench's settings, synchronous_commit off), two queues filled alike: `keyq` as W11
# fills it (bench/systems/jobqueue/keys.sql: 1,000 concurrency keys, at most one running job per
# key) and `plainq` with as many jobs without a key. One PL/pgSQL procedure then claims and
# completes a job of `keyq`, commits, does the same for `plainq`, and so on to the end, adding up
# the time of each side (bench/turns.sh, which bench/dag_cost.sh runs too): the two sides take
# turns job by job, so the ratio repeats where separate runs do not. It measures the server alone:
# one backend, no client.
#   bench/key_cost.sh [jobs a side, a multiple of 1,000] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-20000}
ROUNDS=${2:-3}
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-keys
PORT=${BENCH_PORT:-55498}
LABEL=keyed
. bench/turns.sh
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
SELECT jq_configure('keyq', '{"key_concurrency_limit": 1}') IS NOT NULL \g /dev/null
SQL

for round in $(seq 1 "$ROUNDS"); do
  psql -X -q -v ON_ERROR_STOP=1 -v jobs="$JOBS" <<'SQL'
-- DELETE, not TRUNCATE: the background worker may hold a lock on a table of the history.
DELETE FROM jq_job_history;
-- Each batch names its own key or number, so that each is a call of its own.
SELECT count(*) FROM generate_series(1, 1000) AS k,
     LATERAL jq_enqueue_batch('keyq', array_fill(jsonb_build_object('n', k), ARRAY[:jobs / 1000]),
                              concurrency_key => 'tenant-' || k) \g /dev/null
SELECT count(*) FROM generate_series(1, :jobs / 1000) AS b,
     LATERAL jq_enqueue_batch('plainq', array_fill(jsonb_build_object('n', b), ARRAY[1000])) \g /dev/null
VACUUM ANALYZE;
CHECKPOINT;
SQL
  turns_round "$round" keyq
done
turns_median
