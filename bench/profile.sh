#!/usr/bin/env bash
# Where the server's CPU goes per job, pg_jobqueue against the classic SKIP LOCKED queue, on one
# scratch server: release build, preloaded, 8 clients, W3 (`bench/systems/*/w3_claim_complete.sql`:
# claim, then complete, one transaction each), W1 (`w1_enqueue.sql`: one enqueue per transaction) or W2
# (`w2_enqueue_batch.sql`: 100 jobs per call).
# Each system runs under `perf record -a` with DWARF call graphs; the table gives CPU microseconds
# per job, in total and in the parts of PostgreSQL where the two differ (a part's time includes what
# it calls, so the parts overlap), then the WAL each wrote per job by record type (pg_waldump --stats).
#   bench/profile.sh [seconds per system] [synchronous_commit] [w3|w1|w2]
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE

SECONDS_PER_RUN=${1:-8}
SYNC=${2:-on}
WORKLOAD=${3:-w3}
case $WORKLOAD in
  w3) SCRIPT=w3_claim_complete.sql FILL=$((SECONDS_PER_RUN * 12000)) PER=1 ;;
  w1) SCRIPT=w1_enqueue.sql FILL=0 PER=1 ;;
  w2) SCRIPT=w2_enqueue_batch.sql FILL=0 PER=100 ;;
  *) echo "workload: w3, w1 or w2, not $WORKLOAD" >&2; exit 2 ;;
esac
FREQ=299
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-profile
PORT=${BENCH_PORT:-55497}
. scripts/pgversion.sh
BIN=$PG_BIN
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
work=$(mktemp -d)
trap 'scripts/pg.sh stop "$DIR"; rm -rf "$work"' EXIT

if ! command -v perf >/dev/null; then
  echo "perf is missing: apt-get install linux-perf" >&2
  exit 1
fi

scripts/pg.sh stop "$DIR"
scripts/pg.sh start "$DIR" "$PORT" "shared_buffers = 1GB" "max_wal_size = 8GB" "checkpoint_timeout = 30min" \
  "jit = off" "synchronous_commit = $SYNC" "shared_preload_libraries = 'pg_jobqueue'"
for system in baseline jobqueue; do
  psql -X -q -c "CREATE DATABASE $system"
  PGDATABASE=$system psql -X -q -v ON_ERROR_STOP=1 -v fill=$FILL \
    -f "bench/systems/$system/setup.sql" -f "bench/systems/$system/fill.sql" >/dev/null
done
# As `make bench` does: today's history partition exists before the run.
PGDATABASE=jobqueue psql -X -q -c "SELECT jq_prune()" >/dev/null

# The parts: a label and the functions whose time (with what they call) it is.
PARTS=(
  "executor startup|standard_ExecutorStart"
  "executor run|standard_ExecutorRun"
  "executor end and finish|standard_ExecutorEnd standard_ExecutorFinish"
  "plan cache checks|GetCachedPlan"
  "CHECK constraints|ExecConstraints"
  "index insertions|ExecInsertIndexTuples"
  "commit (with WAL flush)|CommitTransactionCommand"
  "WAL flush|XLogFlush"
  "client protocol|secure_read secure_write"
  "function search_path|ProcessGUCArray AtEOXact_GUC"
  "jq_claim|jq_claim_wait_wrapper"
  "jq_complete|jq_complete_job_wrapper"
  "jq_enqueue|jq_enqueue_one_wrapper"
  "jq_enqueue_batch|jq_enqueue_many_wrapper"
)

declare -A micros jobs
for system in baseline jobqueue; do
  PGDATABASE=$system psql -X -q -c "VACUUM ANALYZE" -c "CHECKPOINT"
  from=$(psql -X -A -t -c "SELECT pg_current_wal_insert_lsn()")
  perf record -a --call-graph dwarf,16384 -F $FREQ -o "$work/$system.data" -- \
    pgbench -n -M prepared -c 8 -j 2 -T "$SECONDS_PER_RUN" -D batch=100 -f "bench/systems/$system/$SCRIPT" "$system" \
    > "$work/$system.pgbench" 2>/dev/null
  jobs[$system]=$(awk -v per=$PER '/actually processed/ { split($0, a, ": "); print (a[2] + 0) * per }' "$work/$system.pgbench")
  to=$(psql -X -A -t -c "SELECT pg_current_wal_insert_lsn()")
  # Writes out the run's last WAL for pg_waldump. Not a checkpoint: that may recycle the run's segments.
  psql -X -q -A -t -c "SELECT pg_switch_wal()" >/dev/null
  # The whole server's WAL over the run, by record type: bytes per job with full-page images.
  as_pg "$BIN/pg_waldump" -p "$DIR/pg_wal" -s "$from" -e "$to" --stats=record 2>/dev/null |
    awk -v j="${jobs[$system]}" '{ gsub(/\([ 0-9.]*\)/, "") } $1 ~ /\// && $2 > 0 { printf "%s %.0f\n", $1, $5 / j }' > "$work/$system.wal"
  total=$(perf report -i "$work/$system.data" -n --sort comm -q -g none 2>/dev/null | awk 'NF >= 2 { s += $(NF - 1) } END { print s }')
  perf report -i "$work/$system.data" --children --comm postgres --sort sym -q -g none 2>/dev/null \
    > "$work/$system.children"
  perf report -i "$work/$system.data" -n --sort comm -q -g none 2>/dev/null | awk '$NF == "postgres" { print $(NF - 1) }' \
    > "$work/$system.postgres"
  us_per_job() { awk -v f=$FREQ -v j="${jobs[$system]}" '{ printf "%.1f", $1 / f / j * 1e6 }'; }
  micros[$system,server]=$(us_per_job < "$work/$system.postgres")
  for part in "${PARTS[@]}"; do
    label=${part%%|*}
    share=0
    for fn in ${part#*|}; do
      s=$(awk -v fn="$fn" '$NF == fn { gsub("%", "", $1); print $1; exit }' "$work/$system.children")
      share=$(awk -v a="$share" -v b="${s:-0}" 'BEGIN { print a + b }')
    done
    micros[$system,$label]=$(awk -v p="$share" -v t="$total" 'BEGIN { print p / 100 * t }' | us_per_job)
  done
  printf '%s: %s jobs in %s s\n' "$system" "${jobs[$system]}" "$SECONDS_PER_RUN"
done

echo
echo "CPU microseconds per ${WORKLOAD^^} job, synchronous_commit = $SYNC, $SECONDS_PER_RUN s each, 8 clients:"
printf '  %-26s %10s %10s %10s\n' part baseline jobqueue difference
labels=(server)
for part in "${PARTS[@]}"; do labels+=("${part%%|*}"); done
for key in "${labels[@]}"; do
  [ "$key" = server ] && shown="all server processes" || shown=$key
  b=${micros[baseline,$key]}; j=${micros[jobqueue,$key]}
  printf '  %-26s %10s %10s %10s\n' "$shown" "$b" "$j" "$(awk -v a="$b" -v b="$j" 'BEGIN { printf "%+.1f", b - a }')"
done

echo
echo "WAL bytes per ${WORKLOAD^^} job by record type (with full-page images), where either system writes 10 or more:"
printf '  %-26s %10s %10s %10s\n' record baseline jobqueue difference
sort -u <(cut -d' ' -f1 "$work/baseline.wal") <(cut -d' ' -f1 "$work/jobqueue.wal") | while read -r record; do
  b=$(awk -v r="$record" '$1 == r { print $2 }' "$work/baseline.wal"); j=$(awk -v r="$record" '$1 == r { print $2 }' "$work/jobqueue.wal")
  [ "${b:-0}" -ge 10 ] || [ "${j:-0}" -ge 10 ] || continue
  printf '  %-26s %10s %10s %+10d\n' "$record" "${b:-0}" "${j:-0}" $(( ${j:-0} - ${b:-0} ))
done
printf '  %-26s %10s %10s\n' all "$(awk '{ s += $2 } END { print s }' "$work/baseline.wal")" \
  "$(awk '{ s += $2 } END { print s }' "$work/jobqueue.wal")"
