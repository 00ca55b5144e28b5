#!/usr/bin/env bash
# What pg_jobqueue costs a server, measured on throwaway servers (guide, "What it costs your
# server"): the background workers and the slots they take, the role they connect as, what a short
# pool of worker slots does, the shared memory of each structure and what it grows with, and the
# dynamic segment made without preload. Prints the chapter's tables in Markdown, as the chapter
# shows them; tests/harness/tests/cost.rs checks the chapter's figures against a server.
#   scripts/cost.sh          the server version PG (15 unless set) for the workers, every installed
#                            version (15, 18) for the shared memory
# As root the servers run as the `postgres` user (scripts/pg.sh). Timings are not measured here.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pgversion.sh
unset RUST_BACKTRACE

PRELOADED="shared_preload_libraries = 'pg_jobqueue'"
FAST="pg_jobqueue.reaper_interval = '200ms'"
BASE=${TMPDIR:-/tmp}/pg_jobqueue-cost-$$
dirs=()
cleanup() {
  local dir
  for dir in "${dirs[@]}"; do PG=${dir##*-pg} scripts/pg.sh stop "$dir" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start NAME VERSION [postgresql.conf lines...]: a new server; sets DIR and PORT.
start() {
  local name=$1 version=$2; shift 2
  DIR=$BASE-$name-pg$version
  PORT=$(free_port)
  dirs+=("$DIR")
  PG=$version scripts/pg.sh start "$DIR" "$PORT" "$@"
}

# q PORT DATABASE SQL: the rows, unaligned, fields separated by |.
q() { "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -At -h 127.0.0.1 -p "$1" -U postgres -d "$2" -c "$3"; }

# until_true PORT SQL: polls until the query returns t (60 s at most).
until_true() {
  local tries=0
  until [ "$(q "$1" postgres "$2")" = t ]; do
    tries=$((tries + 1))
    if [ $tries -gt 600 ]; then echo "timed out waiting until: $2" >&2; exit 1; fi
    sleep 0.1
  done
}

# served PORT DATABASE: waits until a worker serves DATABASE.
served() {
  until_true "$1" "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper' AND datname = '$2'"
}

# with_extension PORT DATABASE...: CREATE EXTENSION in postgres, then in each database named (made
# first), one after the other, each once the one before is served; the last is not waited for.
with_extension() {
  local port=$1 db; shift
  q "$port" postgres "CREATE EXTENSION pg_jobqueue"
  served "$port" postgres
  for db in "$@"; do
    q "$port" postgres "CREATE DATABASE $db"
    q "$port" "$db" "CREATE EXTENSION pg_jobqueue"
    [ "$db" = "${!#}" ] || served "$port" "$db"
  done
}

# The processes that take a max_worker_processes slot, as pg_stat_activity lists them.
WORKERS_SQL="SELECT backend_type, coalesce(datname::text, '(none)'), coalesce(usename::text, '(none)')
             FROM pg_stat_activity
             WHERE backend_type IN ('pg_jobqueue launcher', 'pg_jobqueue reaper', 'logical replication launcher', 'parallel worker')
             ORDER BY backend_type, datname NULLS FIRST"

# The rows of q as the rows of a Markdown table.
table_rows() { awk -F'|' '{ line = "|"; for (i = 1; i <= NF; i++) line = line " " $i " |"; print line }'; }

echo "# What pg_jobqueue costs a PostgreSQL $PG server"
echo
echo "$(date -u '+%Y-%m-%d %H:%M:%S UTC'), scripts/cost.sh, $("$PG_BIN/postgres" --version)"

# 1. The workers, at PostgreSQL's defaults, the extension in three databases.
start workers "$PG" "$PRELOADED" "$FAST"
with_extension "$PORT" app_one app_two
until_true "$PORT" "SELECT count(*) = 3 FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper'"
echo
echo "## Background workers, the extension in three databases (postgres, app_one, app_two)"
echo
echo "| backend_type | datname | usename |"
echo "|---|---|---|"
q "$PORT" postgres "$WORKERS_SQL" | table_rows
echo
echo "| setting | value |"
echo "|---|---|"
q "$PORT" postgres "SELECT name, setting FROM pg_settings
                    WHERE name IN ('max_worker_processes', 'max_parallel_workers', 'max_logical_replication_workers',
                                   'pg_jobqueue.max_workers', 'pg_jobqueue.reaper_databases', 'pg_jobqueue.reaper_role')
                    ORDER BY name" | sed 's/|$/|(empty)/' | table_rows

# 2. The role they connect as, with pg_jobqueue.reaper_role set.
PG=$PG scripts/pg.sh stop "$DIR" >/dev/null
start role "$PG" "$PRELOADED" "$FAST" "pg_jobqueue.reaper_role = 'jq_maintenance'"
q "$PORT" postgres "CREATE ROLE jq_maintenance LOGIN;
                    CREATE EXTENSION pg_jobqueue;
                    GRANT EXECUTE ON FUNCTION jq_reap, jq_prune TO jq_maintenance"
# The launcher looks for a missing role again only a minute later; restarted, it finds it at once.
PG=$PG scripts/pg.sh halt "$DIR"
PG=$PG scripts/pg.sh start "$DIR" "$PORT"
until_true "$PORT" "SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper'"
echo
echo "## With pg_jobqueue.reaper_role = 'jq_maintenance' (the extension in postgres)"
echo
echo "| backend_type | datname | usename |"
echo "|---|---|---|"
q "$PORT" postgres "$WORKERS_SQL" | table_rows

# 3. A short pool: max_worker_processes = 4, the extension in three databases.
PG=$PG scripts/pg.sh stop "$DIR" >/dev/null
start short "$PG" "$PRELOADED" "$FAST" "max_worker_processes = 4"
with_extension "$PORT" app_one app_two
until_true "$PORT" "SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper'"
until grep -q "no free background worker slot" "$DIR/server.log"; do sleep 0.1; done
plan=$(q "$PORT" postgres "CREATE TABLE numbers AS SELECT generate_series(1, 100000) AS n;
                           SET parallel_setup_cost = 0; SET parallel_tuple_cost = 0;
                           SET min_parallel_table_scan_size = 0;
                           EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT count(*) FROM numbers" |
       grep -E 'Workers (Planned|Launched)' | sed 's/^ *//' | paste -sd ';' | sed 's/;/; /')
echo
echo "## max_worker_processes = 4, the extension in three databases (postgres, app_one, app_two)"
echo
echo "| backend_type | datname | usename |"
echo "|---|---|---|"
q "$PORT" postgres "$WORKERS_SQL" | table_rows
echo
echo "The launcher's log line:"
echo
echo '```text'
grep -o "WARNING:  pg_jobqueue launcher: no free background worker slot.*" "$DIR/server.log" | head -1
echo '```'
echo
echo "A parallel query meanwhile: $plan."
PG=$PG scripts/pg.sh stop "$DIR" >/dev/null

# 4. Shared memory, by structure, on each installed server version: at the defaults, then with
# stats_max_queues and max_connections raised (the two settings a structure's size follows).
declare -A at_defaults raised
versions=()
for version in 15 18; do
  [ -f "/usr/lib/postgresql/$version/lib/pg_jobqueue.so" ] || continue
  versions+=("$version")
  SHMEM_SQL="SELECT name, size FROM pg_shmem_allocations WHERE name LIKE 'pg_jobqueue%' ORDER BY name"
  start shmem "$version" "$PRELOADED"
  while IFS='|' read -r name size; do at_defaults[$version,$name]=$size; done < <(q "$PORT" postgres "$SHMEM_SQL")
  PG=$version scripts/pg.sh stop "$DIR" >/dev/null
  start raised "$version" "$PRELOADED" "pg_jobqueue.stats_max_queues = 512" "max_connections = 200"
  while IFS='|' read -r name size; do raised[$version,$name]=$size; done < <(q "$PORT" postgres "$SHMEM_SQL")
  PG=$version scripts/pg.sh stop "$DIR" >/dev/null
done
echo
echo "## Shared memory, preloaded (pg_shmem_allocations.size, bytes)"
echo
header="| structure"
rule="|---"
for version in "${versions[@]}"; do header+=" | PostgreSQL $version, defaults"; rule+="|---:"; done
echo "$header | grows with |"
echo "$rule|---|"
total=()
for name in $(for key in "${!at_defaults[@]}"; do echo "${key#*,}" | tr ' ' '~'; done | LC_ALL=C sort -u); do
  name=${name//\~/ }
  line="| $name"
  growth=""
  for i in "${!versions[@]}"; do
    version=${versions[$i]}
    before=${at_defaults[$version,$name]}
    after=${raised[$version,$name]}
    line+=" | $before"
    total[i]=$(( ${total[i]:-0} + before ))
    if [ "$after" != "$before" ]; then
      case "$name" in
        "pg_jobqueue stats") growth="$(( (after - before) / 256 )) bytes per pg_jobqueue.stats_max_queues" ;;
        *) growth="$(( (after - before) / 100 )) bytes per server process slot (max_connections and the rest)" ;;
      esac
    fi
  done
  echo "$line | ${growth:-fixed} |"
done
line="| total"
for i in "${!versions[@]}"; do line+=" | ${total[i]}"; done
echo "$line | |"

# 5. Without preload: the segment the first claim makes.
start segment "$PG"
q "$PORT" postgres "CREATE EXTENSION pg_jobqueue; SELECT jq_enqueue('q', '{}'); SELECT count(*) FROM jq_claim('q', 'w')" >/dev/null
handle=$(cut -d' ' -f1 "$DIR/pg_stat_tmp/pg_jobqueue.segment")
echo
echo "## Without preload"
echo
echo "The claim fronts' dynamic shared memory segment, made by the first claim: $(stat -c %s "/dev/shm/PostgreSQL.$handle") bytes."
