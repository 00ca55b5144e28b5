#!/usr/bin/env bash
# What the optional parts of a claim cost. pgbench drives claim + complete (one transaction each,
# 4 clients) in three variants, on queues prefilled alike, alternating run by run, median of the runs:
#   baseline  no concurrency limit, inline recovery off (pg_jobqueue.inline_reap_max = 0), which is
#             how claims run where the background reaper serves the database;
#   inline    the same with inline recovery on, the default where no background reaper runs;
#   limit     a concurrency limit too high to be reached (1000): every difference is its
#             bookkeeping (the queue's row lock, a count of running jobs).
# Every run starts from a vacuumed table: claimed jobs leave dead entries at the front of the
# pending-only indexes until vacuum removes them, and that cost must not land on whichever runs second.
#   bench/claim_overhead.sh [seconds per run] [runs per variant]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pgversion.sh   # the server version's psql and pgbench first
unset RUST_BACKTRACE

SECONDS_PER_RUN=${1:-8}
RUNS=${2:-3}
CLIENTS=4
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-claim
PORT=${BENCH_PORT:-55498}
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
trap 'scripts/pg.sh stop "$DIR"' EXIT

scripts/pg.sh stop "$DIR"
scripts/pg.sh start "$DIR" "$PORT" "synchronous_commit = ${SYNCHRONOUS_COMMIT:-on}" "shared_buffers = 512MB"
psql -X -q -v ON_ERROR_STOP=1 <<'SQL'
CREATE EXTENSION pg_jobqueue;
INSERT INTO jq_queues (queue_name, concurrency_limit) VALUES ('limit', 1000);
SET pg_jobqueue.max_batch_size = 100000;
SELECT count(*) FROM jq_enqueue_batch('baseline', array_fill('{}'::jsonb, ARRAY[100000]));
SELECT count(*) FROM jq_enqueue_batch('inline', array_fill('{}'::jsonb, ARRAY[100000]));
SELECT count(*) FROM jq_enqueue_batch('limit', array_fill('{}'::jsonb, ARRAY[100000]));
VACUUM ANALYZE jq_live_jobs;
SQL

work=$(mktemp -d)
VARIANTS=(baseline inline limit)
for queue in "${VARIANTS[@]}"; do
  cat > "$work/$queue.sql" <<SQL
SELECT id AS job, lease_token AS token FROM jq_claim('$queue', 'bench-:client_id') \gset
SELECT jq_complete(:job, 'bench-:client_id', :token);
SQL
done

declare -A rates
for run in $(seq 1 "$RUNS"); do
  for queue in "${VARIANTS[@]}"; do
    psql -X -q -c "VACUUM jq_live_jobs"
    inline_max=0; [ "$queue" = inline ] && inline_max=10
    tps=$(PGOPTIONS="-c pg_jobqueue.inline_reap_max=$inline_max" pgbench -n -c $CLIENTS -j 2 -T "$SECONDS_PER_RUN" -f "$work/$queue.sql" 2>/dev/null \
          | awk '/^tps = / { print $3; exit }')
    rates[$queue]+="$tps "
    printf 'run %d  %-8s  %8.1f jobs/s\n' "$run" "$queue" "$tps"
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
base=$(median "${rates[baseline]}")
echo "median over $RUNS runs of ${SECONDS_PER_RUN}s, $CLIENTS clients, synchronous_commit=${SYNCHRONOUS_COMMIT:-on}:"
for queue in "${VARIANTS[@]}"; do
  awk -v q="$queue" -v b="$base" -v r="$(median "${rates[$queue]}")" \
    'BEGIN { printf "  %-8s %8.1f jobs/s  %6.1f%% of baseline\n", q, r, r / b * 100 }'
done
rm -rf "$work"
