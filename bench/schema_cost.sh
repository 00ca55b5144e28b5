#!/usr/bin/env bash
# What parts of the hot table (jq_live_jobs) cost, as the server runs them (release build, preloaded, 8
# clients, synchronous_commit on), each variant from an emptied, refilled, vacuumed and
# checkpointed table, runs alternating:
#   W1 (one jq_enqueue per transaction) and W3 (claim + complete,
#   bench/systems/jobqueue/w3_claim_complete.sql) with the invariants checked by one call of
#   jq_live_job_consistent (as installed), by the same rules written out as one CHECK expression,
#   in the three constraints of 0.2.0, and with no constraint;
#   one-row INSERTs in a PL/pgSQL loop, the statement cost alone, for the same variants;
#   W2 (100 jobs per jq_enqueue_batch) without an arrival-order index (as installed) and with the
#   one 0.2.0 had (jq_jobs_fifo), which the fairness check no longer needs.
# Variants are made with ALTER TABLE / DROP INDEX on a scratch server, for measuring only.
#   bench/schema_cost.sh [seconds per run] [runs per variant]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pgversion.sh   # the server version's psql and pgbench first
unset RUST_BACKTRACE

SECONDS_PER_RUN=${1:-10}
RUNS=${2:-2}
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-schema
PORT=${BENCH_PORT:-55499}
SYSTEM=bench/systems/jobqueue
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
trap 'scripts/pg.sh stop "$DIR"' EXIT

scripts/pg.sh stop "$DIR"
scripts/pg.sh start "$DIR" "$PORT" "shared_buffers = 1GB" "max_wal_size = 8GB" "checkpoint_timeout = 30min" \
  "jit = off" "shared_preload_libraries = 'pg_jobqueue'"
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION pg_jobqueue"

THREE="ADD CONSTRAINT jq_jobs_max_attempts_positive CHECK (max_attempts >= 1),
  ADD CONSTRAINT jq_jobs_attempts_within_budget CHECK (attempt_count BETWEEN 0 AND max_attempts),
  ADD CONSTRAINT jq_jobs_lease_only_while_running CHECK ((status = 'running') = (lease_owner IS NOT NULL)
      AND (status = 'running') = (lease_expires_at IS NOT NULL))"
CALL="ADD CONSTRAINT jq_live_jobs_consistent CHECK (jq_live_job_consistent(status, max_attempts, attempt_count,
  lease_owner IS NOT NULL, lease_expires_at IS NOT NULL))"
ONE="ADD CONSTRAINT jq_live_jobs_consistent CHECK (max_attempts >= 1 AND attempt_count BETWEEN 0 AND max_attempts
  AND (status = 'running') = (lease_owner IS NOT NULL) AND (status = 'running') = (lease_expires_at IS NOT NULL))"

# The table's constraints as the variant wants them: drop whatever is there, add its own.
constraints() {
  psql -X -q -v ON_ERROR_STOP=1 <<SQL
DO \$\$
DECLARE c text;
BEGIN
  FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'jq_live_jobs'::regclass AND contype = 'c' LOOP
    EXECUTE format('ALTER TABLE jq_live_jobs DROP CONSTRAINT %I', c);
  END LOOP;
END \$\$;
${1:+ALTER TABLE jq_live_jobs $1;}
SQL
}

# One timed run from an emptied table, refilled with $2 jobs; prints jobs per second.
run() {
  local script=$1 fill=$2 jobs_per_tx=$3
  psql -X -q -v ON_ERROR_STOP=1 -c "TRUNCATE jq_live_jobs, jq_job_history, jq_job_events" >/dev/null 2>&1
  [ "$fill" -gt 0 ] && psql -X -q -v ON_ERROR_STOP=1 -v fill="$fill" -f "$SYSTEM/fill.sql" >/dev/null
  psql -X -q -c "VACUUM ANALYZE jq_live_jobs" -c "CHECKPOINT"
  pgbench -n -M prepared -c 8 -j 2 -T "$SECONDS_PER_RUN" -D batch=100 -f "$SYSTEM/$script.sql" 2>/dev/null \
    | awk -v n="$jobs_per_tx" '/^tps/ { printf "%.0f", $3 * n }'
}

# The statement cost alone, one backend, no client: a PL/pgSQL loop of 100,000 one-row INSERTs
# into the table, each a statement that reads and compiles the table's CHECK expressions again.
echo "One-row INSERTs in a PL/pgSQL loop, microseconds each (100,000 per run):"
for r in $(seq 1 "$RUNS"); do
  for variant in call expression none; do
    case $variant in call) constraints "$CALL" ;; expression) constraints "$ONE" ;; none) constraints "" ;; esac
    psql -X -q -c "TRUNCATE jq_live_jobs, jq_job_history, jq_job_events" -c "CHECKPOINT"
    ms=$(psql -X -q -c '\timing on' -c "DO \$\$ BEGIN FOR i IN 1..100000 LOOP
        INSERT INTO jq_live_jobs (queue_id, payload, available_at, max_attempts, created_at)
        VALUES (1, '{\"n\": 1}', now(), 3, now()); END LOOP; END \$\$" | awk '/^Time/ { print $2 }')
    echo "  run $r  $variant: $(awk -v ms="$ms" 'BEGIN { printf "%.1f", ms * 1000 / 100000 }')"
  done
done

for workload in w1_enqueue w3_claim_complete; do
  [ $workload = w1_enqueue ] && fill=0 || fill=$((SECONDS_PER_RUN * 9000))
  echo "$workload, jobs/s (runs of $SECONDS_PER_RUN s):"
  for r in $(seq 1 "$RUNS"); do
    for variant in call expression three none; do
      case $variant in
        call) constraints "$CALL" ;; expression) constraints "$ONE" ;;
        three) constraints "$THREE" ;; none) constraints "" ;;
      esac
      echo "  run $r  $variant: $(run $workload $fill 1)"
    done
  done
done
constraints "$CALL"

echo "W2, jq_enqueue_batch of 100, jobs/s (runs of $SECONDS_PER_RUN s):"
for r in $(seq 1 "$RUNS"); do
  for variant in with without; do
    if [ $variant = with ]; then
      psql -X -q -c "SET client_min_messages = warning" -c "CREATE INDEX IF NOT EXISTS jq_jobs_fifo ON jq_live_jobs (queue_id, available_at, id) WHERE status = 'pending'"
    else
      psql -X -q -c "SET client_min_messages = warning" -c "DROP INDEX IF EXISTS jq_jobs_fifo"
    fi
    echo "  run $r  $variant jq_jobs_fifo: $(run w2_enqueue_batch 0 100)"
  done
done
