#!/usr/bin/env bash
# make demo: a throwaway server with pg_jobqueue preloaded, a few thousand jobs, four jq-worker
# processes, one of them killed while it holds a job. The killed worker's lease expires, the
# background reaper returns the job, and another worker finishes it. jq-dashboard serves the queue
# beside it on 127.0.0.1 (DEMO_DASHBOARD_PORT, 55480 unless set); DEMO_LINGER=SECONDS keeps the
# server and the dashboard up that long after the end. Stops its server when done.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pgversion.sh   # the server version's psql and pgbench first
unset RUST_BACKTRACE

DIR=${TMPDIR:-/tmp}/pg_jobqueue-demo
PORT=${DEMO_PORT:-55499}
JOBS=3000
WORKERS=4
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -At)
DSN="host=$PGHOST port=$PORT user=postgres dbname=postgres"
WORKER_BIN=${CARGO_TARGET_DIR:-target}/debug/jq-worker
DASHBOARD_BIN=${CARGO_TARGET_DIR:-target}/debug/jq-dashboard
DASHBOARD_PORT=${DEMO_DASHBOARD_PORT:-55480}
pids=()

cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  scripts/pg.sh stop "$DIR"
}
trap cleanup EXIT

say() { printf '%s  %s\n' "$(date +%H:%M:%S)" "$*"; }

cargo build -q -p jq-worker -p jq-dashboard
scripts/pg.sh stop "$DIR"
scripts/pg.sh start "$DIR" "$PORT" "shared_preload_libraries = 'pg_jobqueue'"
say "server up on port $PORT (pg_jobqueue preloaded)"
"${PSQL[@]}" -c "CREATE EXTENSION pg_jobqueue"
# Queue settings: a short lease, so the killed worker's job comes back within seconds.
"${PSQL[@]}" -c "INSERT INTO jq_queues (queue_name, default_lease, backoff_base) VALUES ('demo', '3 seconds', '100 ms')"
say "queue 'demo': default lease 3 s, backoff from 100 ms"

# The dashboard, as the superuser of this throwaway server (a real one connects as a role with
# monitor or manage rights: guide, "Dashboard"). Its first line says where it listens.
"$DASHBOARD_BIN" --listen "127.0.0.1:$DASHBOARD_PORT" --dsn "$DSN" >"$DIR/dashboard.log" 2>&1 &
pids+=($!)
until grep -q 'listening on' "$DIR/dashboard.log" 2>/dev/null; do
  kill -0 "${pids[-1]}" 2>/dev/null || { cat "$DIR/dashboard.log"; exit 1; }
  sleep 0.1
done
say "dashboard: $(sed -n 's/^jq-dashboard listening on //p' "$DIR/dashboard.log") (open it in a browser while the queue drains)"

# In batches of pg_jobqueue.max_batch_size (1000) at most.
"${PSQL[@]}" -c "SELECT count(*) FROM generate_series(0, $JOBS - 1, 1000) c,
    LATERAL jq_enqueue_batch('demo', (SELECT array_agg(jsonb_build_object('n', i))
                                      FROM generate_series(c + 1, least(c + 1000, $JOBS)) i))" >/dev/null
say "enqueued $JOBS jobs into queue 'demo'"

# The job: read the payload {"n": N} from stdin. Every 97th job fails its first attempt with exit
# status 1, which jq-worker reports as a retryable failure, with stderr as the error message. (Not
# 75: that snoozes the job and gives its attempt back, so its next run would be attempt 1 again.)
JOB='p=$(cat); n=${p##*: }; n=${n%\}}
if [ $((n % 97)) -eq 0 ] && [ "$JQ_ATTEMPT" -eq 1 ]; then echo "a transient error, retried" >&2; exit 1; fi'
# worker-1 hangs on its first job (a minute of "work"), as a stuck or dying worker would.
HANG='cat >/dev/null; sleep 60'
for w in $(seq 1 $WORKERS); do
  job=$JOB; [ "$w" -eq 1 ] && job=$HANG
  "$WORKER_BIN" --dsn "$DSN" --queue demo --name "worker-$w" --wait 1 --once-empty -- sh -c "$job" \
    2>"$DIR/worker-$w.log" &
  pids+=($!)
done
victim_pid=${pids[1]}
disown "$victim_pid"   # it is killed below; spare the shell's "Killed" notice
say "started $WORKERS jq-worker processes; worker-1 hangs on its first job"

# Kill worker-1 while it holds that job. Its connection closes with it, and its command (sleep 60)
# is killed with it; its lease stays until it expires.
victim=""
while [ -z "$victim" ]; do
  victim=$("${PSQL[@]}" -c "SELECT id || ' ' || lease_token FROM jq_jobs
                             WHERE lease_owner LIKE 'worker-1/%' AND status = 'running' LIMIT 1")
  [ -n "$victim" ] || sleep 0.05
done
read -r victim_job victim_token <<<"$victim"
kill -9 "$victim_pid" 2>/dev/null || true
say "killed worker-1 (SIGKILL) while it held job $victim_job (lease token $victim_token)"

# Nobody calls jq_reap(): the background reaper (preloaded, one pass a second) recovers the job.
while :; do
  sleep 1
  read -r pending scheduled running expiring dead succeeded <<<"$("${PSQL[@]}" -F ' ' -c "
      SELECT pending, scheduled, running, expiring_10s, dead,
             (SELECT count(*) FROM jq_jobs WHERE queue_name = 'demo' AND status = 'succeeded')
      FROM jq_queue_stats WHERE queue_name = 'demo'")"
  say "pending $pending  scheduled $scheduled  running $running (expiring <10s: $expiring)  dead $dead  succeeded $succeeded"
  [ "$((pending + scheduled + running))" -eq 0 ] && break
done
for pid in "${pids[@]:2}"; do wait "$pid"; done

echo
say "the killed worker's job, from jq_jobs and its history in jq_job_events:"
psql -X -c "SELECT id, status, attempt_count, lease_token, last_error_code FROM jq_jobs WHERE id = $victim_job"
psql -X -c "SELECT event, status, attempt, worker, lease_token, error_code FROM jq_job_events
            WHERE job_id = $victim_job ORDER BY id"
say "the background reaper's log:"
grep 'pg_jobqueue reaper' "$DIR/server.log" | sed 's/^/    /'
say "the workers' log lines about job $victim_job:"
grep -h "job $victim_job\b" "$DIR"/worker-*.log | sort | sed 's/^/    /'
say "final state of every queue (jq_queue_stats), and jobs by status:"
psql -X -c "SELECT * FROM jq_queue_stats"
psql -X -c "SELECT status, count(*), sum(attempt_count) AS attempts FROM jq_jobs GROUP BY status ORDER BY status"

done_ok=$("${PSQL[@]}" -c "SELECT count(*) = $JOBS FROM jq_jobs WHERE status = 'succeeded'")
victim_ok=$("${PSQL[@]}" -c "SELECT status = 'succeeded' AND attempt_count >= 2 FROM jq_jobs WHERE id = $victim_job")
if [ "$done_ok" = t ] && [ "$victim_ok" = t ]; then
  say "demo finished: all $JOBS jobs succeeded, job $victim_job recovered from the killed worker"
  if [ "${DEMO_LINGER:-0}" -gt 0 ]; then
    say "the dashboard stays at http://127.0.0.1:$DASHBOARD_PORT for $DEMO_LINGER s"
    sleep "$DEMO_LINGER"
  fi
else
  say "demo FAILED: not every job succeeded"; exit 1
fi
