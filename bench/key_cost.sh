#!/usr/bin/env bash
# What a concurrency key costs a job, in one session, without the noise of a shared machine. One
# server (make bench's settings, synchronous_commit off), two queues filled alike: `keyq` as W11
# fills it (bench/systems/jobqueue/keys.sql: 1,000 concurrency keys, at most one running job per
# key) and `plainq` with as many jobs without a key. One PL/pgSQL procedure then claims and
# completes a job of `keyq`, commits, does the same for `plainq`, and so on to the end, adding up
# the time of each side (bench/systems/jobqueue/turns.sql, which bench/dag_cost.sh runs too): the
# two sides take turns job by job, so the ratio repeats where separate runs do not. It measures the server alone: one backend, no client.
#   bench/key_cost.sh [jobs a side, a multiple of 1,000] [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pgversion.sh   # the server version's psql first
unset RUST_BACKTRACE

JOBS=${1:-20000}
ROUNDS=${2:-3}
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-keys
PORT=${BENCH_PORT:-55498}
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
trap 'scripts/pg.sh stop "$DIR"' EXIT

scripts/pg.sh stop "$DIR"
scripts/pg.sh start "$DIR" "$PORT" "shared_buffers = 1GB" "max_wal_size = 8GB" "checkpoint_timeout = 30min" \
  "jit = off" "shared_preload_libraries = 'pg_jobqueue'" "synchronous_commit = off" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION pg_jobqueue;
SELECT jq_configure('keyq', '{"key_concurrency_limit": 1}') IS NOT NULL \g /dev/null
SQL
psql -X -q -v ON_ERROR_STOP=1 -f bench/systems/jobqueue/turns.sql

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
  psql -X -q -v ON_ERROR_STOP=1 -c "CALL bench_drain($round, 'keyq')"
  psql -X -At -F ' ' -c "SELECT round, jobs, round(side_us::numeric, 1), round(plain_us::numeric, 1),
                                round((plain_us / side_us)::numeric, 3) FROM bench_turns WHERE round = $round" |
    awk '{ printf "round %d  %d jobs each  keyed %7.1f us/job  plain %7.1f us/job  plain/keyed %s\n", $1, $2, $3, $4, $5 }'
done
psql -X -At -c "SELECT 'median of ' || count(*) || ' rounds: plain/keyed ' ||
                       round(percentile_disc(0.5) WITHIN GROUP (ORDER BY plain_us / side_us)::numeric, 3)
                FROM bench_turns"
