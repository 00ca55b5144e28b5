#!/usr/bin/env bash
# How soon the background reaper reaps an expired lease: a preloaded server with the default
# settings (reaper_interval 1 s), N jobs claimed with a 1-second lease at staggered moments and
# abandoned; reports the delay from each lease's expiry to its lease_expired event.
#   bench/reap_latency.sh [jobs]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pgversion.sh   # the server version's psql and pgbench first
unset RUST_BACKTRACE

JOBS=${1:-10}
DIR=${TMPDIR:-/tmp}/pg_jobqueue-bench-reap
PORT=${BENCH_PORT:-55495}
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -At)
trap 'scripts/pg.sh stop "$DIR"' EXIT

scripts/pg.sh stop "$DIR"
scripts/pg.sh start "$DIR" "$PORT" "shared_preload_libraries = 'pg_jobqueue'"
"${PSQL[@]}" -c "CREATE EXTENSION pg_jobqueue"
"${PSQL[@]}" -c "SET pg_jobqueue.max_batch_size = 1000000" -c "SELECT count(*) FROM jq_enqueue_batch('lat', array_fill('{}'::jsonb, ARRAY[$JOBS]))" >/dev/null
# Staggered claims, so that expiries fall at different points of the reaper's interval.
for _ in $(seq 1 "$JOBS"); do
  "${PSQL[@]}" -c "SELECT id FROM jq_claim('lat', 'abandoned', interval '1 second')" >/dev/null
  sleep 0.37
done
until [ "$("${PSQL[@]}" -c "SELECT count(*) FROM jq_job_events WHERE event = 'lease_expired'")" -ge "$JOBS" ]; do
  sleep 0.2
done
psql -X -c "
  WITH delay AS (
      SELECT extract(epoch FROM e.at - (j.claimed_at + interval '1 second')) AS s
      FROM jq_job_events e JOIN jq_jobs j ON j.id = e.job_id WHERE e.event = 'lease_expired')
  SELECT count(*) AS leases, round(min(s)::numeric, 3) AS min_s,
         round((percentile_cont(0.5) WITHIN GROUP (ORDER BY s))::numeric, 3) AS median_s,
         round(max(s)::numeric, 3) AS max_s,
         current_setting('pg_jobqueue.reaper_interval') AS reaper_interval
  FROM delay"
