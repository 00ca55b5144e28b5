#!/usr/bin/env bash
# What an enqueue is made of, against the peers W1 and W2 measure it by (release build, preloaded,
# 8 clients, one scratch server, runs alternating; jobs/s):
#   W1 (one enqueue per transaction) and W2 (100 per call) for pg_jobqueue as installed;
#   `jq_lean`: the hot table with only the two indexes the baseline has (its primary key and the
#     claim index), the other seven dropped;
#   `jq_bare`: those two indexes and no CHECK constraint either;
#   `jq_statement`: the function's own statement (enqueue.sql, enqueue_batch.sql) sent by the
#     client, without the function around it;
#   the baseline (W1) and pgmq (W2).
# The variants are made with DROP INDEX and ALTER TABLE on a scratch server, for measuring only.
# Nothing is emptied between runs: each database grows by what its own runs insert (a few million
# rows by the last W2 run), unlike `make bench`, which starts every run from an emptied table.
#   bench/enqueue_cost.sh [seconds per run] [runs] [synchronous_commit]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pgversion.sh   # the server version's psql and pgbench first
unset RUST_BACKTRACE

SECONDS_PER_RUN=${1:-8}
RUNS=${2:-3}
SYNC=${3:-off}
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-enqueue
PORT=${BENCH_PORT:-55496}
SYSTEMS=bench/systems
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
work=$(mktemp -d)
chmod 755 "$work"
trap 'scripts/pg.sh stop "$DIR"; rm -rf "$work"' EXIT

scripts/pg.sh stop "$DIR"
scripts/pg.sh start "$DIR" "$PORT" "shared_buffers = 1GB" "max_wal_size = 8GB" "checkpoint_timeout = 30min" \
  "jit = off" "synchronous_commit = $SYNC" "shared_preload_libraries = 'pg_jobqueue'" \
  "pg_jobqueue.reaper_databases = ''"
sql() { psql -X -q -v ON_ERROR_STOP=1 "$@" >/dev/null; }
for db in jq jq_lean jq_bare; do
  sql -c "CREATE DATABASE $db"
  # As `make bench` does: today's history partition and the queue's number exist before the runs.
  PGDATABASE=$db sql -f $SYSTEMS/jobqueue/setup.sql -c "SELECT jq_prune()" -c "SELECT jq_enqueue('bench', '{}')"
done
for db in jq_lean jq_bare; do
  PGDATABASE=$db sql -c "DROP INDEX jq_live_jobs_held, jq_live_jobs_expiring, jq_live_jobs_unresolved,
    jq_live_jobs_dedup, jq_live_jobs_ordering, jq_live_jobs_key_claim, jq_live_jobs_running"
done
PGDATABASE=jq_bare sql -c "ALTER TABLE jq_live_jobs DROP CONSTRAINT jq_live_jobs_consistent"
sql -c "CREATE DATABASE baseline"
PGDATABASE=baseline sql -f $SYSTEMS/baseline/setup.sql
sql -c "CREATE DATABASE pgmq"
PGDATABASE=pgmq sql -f "$(bench/fetch_pgmq.sh target/bench)" -f $SYSTEMS/pgmq/setup.sql

# The function's statements with the arguments the function gives them for the bench queue (its
# number, priority 0, max_attempts as the job enqueued above got it, now, no key, deadline or
# dependency), as literals: pgbench prepares each statement as it does the functions' calls. W2's
# counts its ids, as the function's call in W2 does, rather than sending them to the client.
queue=$(psql -X -A -t -d jq -c "SELECT queue_id FROM jq_queue_ids WHERE queue_name = 'bench'")
attempts=$(psql -X -A -t -d jq -c "SELECT max_attempts FROM jq_jobs WHERE queue_name = 'bench' LIMIT 1")
grep -v '^--' sql/queries/enqueue.sql | sed -e 's/\$12/0/; s/\$11/NULL::bigint[]/; s/\$10/NULL::timestamptz/' \
  -e 's/\$9/NULL::text/; s/\$8/now()/g; s/\$7/NULL::text/; s/\$6/NULL::text/; s/\$5/'"$attempts"'/' \
  -e 's/\$4/NULL::timestamptz/; s/\$3/0/; s/\$2/'"'"'{"n": 1}'"'"'::jsonb/; s/\$1/'"$queue"'/' >"$work/w1_statement.sql"
echo ";" >>"$work/w1_statement.sql"
grep -v '^--' sql/queries/enqueue_batch.sql | sed -e 's/\$10/0/; s/\$9/NULL::bigint[]/; s/\$8/NULL::timestamptz/' \
  -e 's/\$7/NULL::text/; s/\$6/now()/g; s/\$5/'"$attempts"'/; s/\$4/NULL::timestamptz/; s/\$3/0/' \
  -e 's/\$2::jsonb\[\]/array_fill('"'"'{"n": 1}'"'"'::jsonb, ARRAY[:batch::int])/; s/\$1/'"$queue"'/' \
  -e 's/^SELECT id FROM inserted ORDER BY id$/SELECT count(*) FROM (SELECT id FROM inserted ORDER BY id) AS ids/' \
  >"$work/w2_statement.sql"
echo ";" >>"$work/w2_statement.sql"
if grep -q '\$[0-9]' "$work/w1_statement.sql" "$work/w2_statement.sql" || ! grep -q 'count(\*)' "$work/w2_statement.sql"; then
  echo "enqueue_cost.sh: the statements' parameters changed; update the literals here" >&2
  exit 1
fi

run() {
  local db=$1 script=$2 jobs=$3 tps
  tps=$(as_pg "$PG_BIN/pgbench" -n -M prepared -c 8 -j 2 -T "$SECONDS_PER_RUN" -D batch=100 \
    -f "$script" -h "$PGHOST" -p "$PORT" -U postgres "$db" 2>"$work/pgbench.err" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
  if [ -z "$tps" ]; then
    echo "enqueue_cost.sh: pgbench failed on $script in $db:" >&2
    cat "$work/pgbench.err" >&2
    exit 1
  fi
  awk -v t="$tps" -v j="$jobs" 'BEGIN { printf "%.0f", t * j }'
}
echo "synchronous_commit = $SYNC, $RUNS runs of $SECONDS_PER_RUN s, 8 clients; jobs/s"
for w in w1 w2; do
  jobs=1; peer=baseline; script=w1_enqueue.sql
  [ $w = w2 ] && { jobs=100; peer=pgmq; script=w2_enqueue_batch.sql; }
  for r in $(seq "$RUNS"); do
    line="$w run $r:"
    for db in jq jq_lean jq_bare jq_statement $peer; do
      case $db in
        jq_statement) n=$(run jq "$work/${w}_statement.sql" $jobs) ;;
        jq*) n=$(run $db $SYSTEMS/jobqueue/$script $jobs) ;;
        *) n=$(run $db $SYSTEMS/$peer/$script $jobs) ;;
      esac
      line="$line $db $n"
    done
    echo "$line"
  done
done
