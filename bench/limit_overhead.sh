#!/usr/bin/env bash
# What a concurrency limit costs a claim. Two queues, prefilled alike: `free` has no limit, `capped`
# has a limit too high to be reached (1000), so every difference is the limit's bookkeeping: its
# claims run under the queue's row lock and count running jobs. pgbench drives claim + complete,
# one transaction each, 4 clients, alternating the queues run by run, median of the runs. Every run
# starts from a vacuumed table: claimed jobs leave dead entries at the front of the pending-only
# indexes until vacuum removes them, and that cost must not land on whichever queue runs second.
#   bench/limit_overhead.sh [seconds per run] [runs per queue]
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE

SECONDS_PER_RUN=${1:-8}
RUNS=${2:-3}
CLIENTS=4
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-limit
PORT=${BENCH_PORT:-55498}
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
trap 'scripts/pg.sh stop "$DIR"' EXIT

scripts/pg.sh stop "$DIR"
scripts/pg.sh start "$DIR" "$PORT" "synchronous_commit = ${SYNCHRONOUS_COMMIT:-on}" "shared_buffers = 512MB"
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION pg_jobqueue;
INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('capped', 1000);
SELECT count(*) FROM jq_enqueue_batch('free', array_fill('{}'::jsonb, ARRAY[100000]));
SELECT count(*) FROM jq_enqueue_batch('capped', array_fill('{}'::jsonb, ARRAY[100000]));
VACUUM ANALYZE jq_jobs;
SQL

work=$(mktemp -d)
for queue in free capped; do
  cat > "$work/$queue.sql" <<SQL
SELECT id AS job, lease_token AS token FROM jq_claim('$queue', 'bench-:client_id') \gset
SELECT jq_complete(:job, 'bench-:client_id', :token);
SQL
done

declare -A rates
for run in $(seq 1 "$RUNS"); do
  for queue in free capped; do
    psql -X -q -c "VACUUM jq_jobs"
    tps=$(pgbench -n -c $CLIENTS -j 2 -T "$SECONDS_PER_RUN" -f "$work/$queue.sql" 2>/dev/null \
          | awk '/^tps = / { print $3; exit }')
    rates[$queue]+="$tps "
    printf 'run %d  %-6s  %8.1f jobs/s\n' "$run" "$queue" "$tps"
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
free=$(median "${rates[free]}")
capped=$(median "${rates[capped]}")
awk -v f="$free" -v c="$capped" -v sc="${SYNCHRONOUS_COMMIT:-on}" 'BEGIN {
  printf "median over runs (synchronous_commit=%s): no limit %.1f jobs/s, limit %.1f jobs/s: the limit costs %.1f%%\n",
         sc, f, c, (f - c) / f * 100 }'
rm -rf "$work"
