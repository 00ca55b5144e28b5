#!/usr/bin/env bash
# PostgreSQL's own regression suite (src/test/regress, its parallel schedule, as `make
# installcheck-parallel` runs it) against two throwaway servers with the extension created in the
# suite's database: one without the library preloaded, and one with it in shared_preload_libraries
# and its background worker connected to that database. Preloading puts the library's hooks under
# every statement of every session, so a hook that changes what PostgreSQL says (an error rethrown
# without its CONTEXT or cursor position, or with another DETAIL) or does shows up as a test of
# PostgreSQL's that fails only when preloaded, or that fails on both with other output when
# preloaded. Tests that fail on both alike (a suite a minor version off the server, the extension's
# objects in a catalog listing) are PostgreSQL's business and only counted.
#
#   scripts/pgsuite.sh     exits 1 if preloading changed any test, and keeps both runs' outputs
#                          and each such test's diff (their paths are printed); 0 otherwise,
#                          keeping nothing; 2 if the suite could not run
#
# The suite and its C modules come from Debian's source package, fetched and built once per machine
# by `scripts/setup.sh test` (fetch_regress_suite). Expects the extension to be installed. As root
# the servers run as `postgres`.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE   # it would put Rust backtraces into error DETAIL lines

. scripts/pgversion.sh
BIN=$PG_BIN
PG_REGRESS=$PG_PGXS/src/test/regress/pg_regress
SUITE=/var/cache/pg_jobqueue/pg$PG-regress
if [ ! -f "$SUITE/READY" ]; then
  echo "PostgreSQL's regression suite is not in $SUITE: run scripts/setup.sh test" >&2
  exit 2
fi
REGRESS_DIR=$SUITE/tree/src/test/regress

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

work=$(mktemp -d "${TMPDIR:-/tmp}/pg_jobqueue-pgsuite.XXXXXX")
chmod 755 "$work"
[ "$(id -u)" -eq 0 ] && chown postgres: "$work"
running=()
cleanup() {
  local dir
  for dir in "${running[@]}"; do
    [ -f "$dir/data/postmaster.pid" ] && as_pg "$BIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1
  done
  return 0
}
trap cleanup EXIT

# The port only names the socket file: the servers listen on no TCP port, each on a socket in its
# own directory, so two runs (or any other server on the machine) cannot collide.
PORT=5432

# What the two servers share. The settings pg_regress gives the server it starts itself
# (`make check`), so that the suite runs as PostgreSQL's developers run it: max_prepared_transactions
# for prepared_xacts, and the log lines. fsync off: a throwaway server. max_worker_processes: room
# for the library's launcher and workers beside the suite's parallel workers (8 at most), so that
# both servers give parallel queries the same workers.
common_conf() {
  local dir=$1
  cat <<EOF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$dir'
fsync = off
log_autovacuum_min_duration = 0
log_checkpoints = on
log_line_prefix = '%m %b[%p] %q%a '
log_lock_waits = on
log_temp_files = 128kB
max_prepared_transactions = 2
max_worker_processes = 20
EOF
}

psql_in() {
  local dir=$1 db=$2; shift 2
  as_pg "$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$PORT" -U postgres -d "$db" "$@"
}

pg_ctl_in() {
  local dir=$1; shift
  as_pg "$BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 "$@" >/dev/null
}

reapers_in_regression() {
  psql_in "$1" postgres -tA -c "SELECT count(*) FROM pg_stat_activity
    WHERE backend_type = 'pg_jobqueue reaper' AND datname = 'regression'"
}

# One run: a fresh cluster, the suite's database with the extension, the server as the run wants
# it, then the suite.
#   run_suite NAME PRELOAD   PRELOAD: yes or no
#
# The extension is created in `regression` on both servers, so that they differ in preloading alone.
# The background worker serves only a database that has the extension, so the preloaded server
# needs it there; and the suite's catalog checks list some of its objects (opr_sanity: its SECURITY
# DEFINER functions, jq_grant and jq_revoke; type_sanity: a relation without an access method),
# which fail those tests on both servers alike instead of only on the preloaded one. Creating it
# in another database would leave the suite's database unserved.
run_suite() {
  local name=$1 preload=$2
  local dir=$work/$name
  mkdir -p "$dir/data" "$dir/out"
  [ "$(id -u)" -eq 0 ] && chown -R postgres: "$dir"
  chmod 700 "$dir/data"
  # --no-locale and UTF8, as the other layers: messages in English and one encoding whatever the
  # caller's locale.
  as_pg "$BIN/initdb" -D "$dir/data" -U postgres -A trust --no-sync --no-locale -E UTF8 >/dev/null
  common_conf "$dir" >> "$dir/data/postgresql.conf"
  running+=("$dir")
  pg_ctl_in "$dir" start

  # The suite's database, made as pg_regress makes it (create_database in pg_regress.c), and the
  # extension, before the library is preloaded: the worker's launcher then finds them when the
  # server starts, and serves the database from the first test on. pg_regress is told to use the
  # database as it is (--use-existing) rather than drop it and make it again.
  psql_in "$dir" postgres <<'EOF'
CREATE DATABASE "regression" TEMPLATE=template0 ENCODING='UTF8' LC_COLLATE='C' LC_CTYPE='C';
ALTER DATABASE "regression" SET lc_messages TO 'C';
ALTER DATABASE "regression" SET lc_monetary TO 'C';
ALTER DATABASE "regression" SET lc_numeric TO 'C';
ALTER DATABASE "regression" SET lc_time TO 'C';
ALTER DATABASE "regression" SET bytea_output TO 'hex';
ALTER DATABASE "regression" SET timezone_abbreviations TO 'Default';
EOF
  psql_in "$dir" regression -c 'CREATE EXTENSION pg_jobqueue'

  if [ "$preload" = yes ]; then
    echo "shared_preload_libraries = 'pg_jobqueue'" >> "$dir/data/postgresql.conf"
    pg_ctl_in "$dir" restart
    # The worker serves every database with the extension when pg_jobqueue.reaper_databases is
    # '*'; a library whose default names one database instead is told the suite's.
    if [ "$(psql_in "$dir" postgres -tA -c "SELECT boot_val FROM pg_settings
             WHERE name = 'pg_jobqueue.reaper_databases'")" != '*' ]; then
      echo "pg_jobqueue.reaper_databases = 'regression'" >> "$dir/data/postgresql.conf"
      pg_ctl_in "$dir" restart
    fi
    # The worker must be connected to the suite's database before the first test.
    local waited=0
    until [ "$(reapers_in_regression "$dir")" = 1 ]; do
      if [ "$waited" -ge 30 ]; then
        echo "no pg_jobqueue worker connected to database regression after 30 s; see $dir/server.log" >&2
        exit 2
      fi
      sleep 1; waited=$((waited + 1))
    done
  fi

  echo "== PostgreSQL's regression suite, $([ "$preload" = yes ] && echo "preloaded" || echo "without the library preloaded")"
  local status=0
  # As `make installcheck-parallel` runs it (src/test/regress/GNUmakefile): the parallel schedule,
  # at most 20 tests at once. The schedule and the data files are read from the cache; everything
  # written (results, the copies of COPY TO) goes to the run's own directory.
  (cd "$dir/out" && as_pg "$PG_REGRESS" --use-existing --host="$dir" --port="$PORT" --user=postgres \
      --bindir="$BIN" --inputdir="$REGRESS_DIR" --outputdir="$dir/out" --dlpath="$SUITE/lib" \
      --schedule="$REGRESS_DIR/parallel_schedule" --max-concurrent-tests=20) \
      2>&1 | tee "$dir/summary" || status=$?
  if [ "$preload" = yes ] && [ "$(reapers_in_regression "$dir")" != 1 ]; then
    echo "the pg_jobqueue worker of database regression was gone at the end of the suite; see $dir/server.log" >&2
    status=2
  fi
  pg_ctl_in "$dir" -m fast stop
  # pg_regress of 15 says `name ... ok` or `... FAILED` (or `failed (ignored)`) per test, prefixed
  # by `test` when it runs alone; 16 and later say `ok N - name` or `not ok N + name` (`+` in a
  # parallel group). Exit 1 means some test failed, anything else that it could not run.
  { sed -nE 's/^(test +| +)([A-Za-z0-9_.]+) +\.\.\. +(ok|FAILED|failed \(ignored\)).*/\2 \3/p' "$dir/summary" |
      sed 's/failed (ignored)/FAILED/'
    sed -nE 's/^ok +[0-9]+ +[-+] +([A-Za-z0-9_.]+) .*/\1 ok/p; s/^not ok +[0-9]+ +[-+] +([A-Za-z0-9_.]+) .*/\1 FAILED/p' \
      "$dir/summary"; } > "$dir/verdicts"
  if [ "$status" -gt 1 ] || [ ! -s "$dir/verdicts" ]; then
    echo "pg_regress could not run the suite ($name); outputs kept in $work" >&2
    exit 2
  fi
}

report() {
  local name=$1
  printf '%s of %s passed' "$(grep -c ' ok$' "$work/$name/verdicts" || true)" \
    "$(wc -l < "$work/$name/verdicts")"
}

run_suite plain no
run_suite preloaded yes

# Per test, its verdict without the library preloaded and with it; a test one run did not report
# counts as failed there.
join -a 1 -a 2 -e missing -o 0,1.2,2.2 <(sort "$work/plain/verdicts") <(sort "$work/preloaded/verdicts") \
  > "$work/verdicts"

# Each test's diff of the preloaded run on its own, cut out of pg_regress's regression.diffs (one
# `diff` header per test, naming results/NAME.out).
mkdir -p "$work/preloaded/diffs" "$work/only-preloaded"
awk -v dir="$work/preloaded/diffs" '
  /^diff / { file = ""; if (match($0, /results\/[A-Za-z0-9_.]+\.out/)) file = substr($0, RSTART + 8, RLENGTH - 12) }
  file != "" { print > (dir "/" file ".diff") }' "$work/preloaded/out/regression.diffs" 2>/dev/null || true

# What preloading changed, test by test:
#   fails only when preloaded      passes without, fails with (its diff: against the expected output);
#   other output when preloaded    fails on both, with other output when preloaded (its diff: the
#                                  output without against the output with). A test PostgreSQL's
#                                  expectations fail on both servers (a suite a minor version
#                                  off the server, or the extension's own objects in a catalog
#                                  listing) still checks what preloading changes in it.
# The closing line counts as passed the tests that pass on both servers,
# and as failed every test preloading changed; tests that fail on both alike are in neither.
only_preloaded=() other_output=() alike=()
while read -r name plain preloaded; do
  if [ "$plain" = ok ] && [ "$preloaded" != ok ]; then
    only_preloaded+=("$name")
    cp "$work/preloaded/diffs/$name.diff" "$work/only-preloaded/" 2>/dev/null || true
  elif [ "$plain" != ok ] && [ "$preloaded" != ok ]; then
    if cmp -s "$work/plain/out/results/$name.out" "$work/preloaded/out/results/$name.out"; then
      alike+=("$name"); continue
    fi
    other_output+=("$name")
    (cd "$work" && diff -U3 "plain/out/results/$name.out" "preloaded/out/results/$name.out") \
      > "$work/only-preloaded/$name.diff" || true
  fi
done < "$work/verdicts"
changed=("${only_preloaded[@]}" "${other_output[@]}")

listed() {
  if [ "$#" -eq 0 ]; then echo none; else echo "$# ($*)"; fi
}
echo "without the library preloaded: $(report plain); preloaded: $(report preloaded);" \
  "failing only when preloaded: $(listed "${only_preloaded[@]}");" \
  "failing on both, with other output when preloaded: $(listed "${other_output[@]}")"
[ "${#alike[@]}" -ne 0 ] &&
  echo "failing on both alike (PostgreSQL's, not counted): ${alike[*]}"
echo "test result: pgsuite. $(( $(wc -l < "$work/verdicts") - ${#changed[@]} - ${#alike[@]} )) passed; ${#changed[@]} failed"
if [ "${#changed[@]}" -eq 0 ]; then
  rm -rf "$work"
  exit 0
fi

echo "what preloading changed, test by test:"
for name in "${changed[@]}"; do
  echo "  $name  $work/only-preloaded/$name.diff"
done
echo "both runs (outputs, regression.diffs, server logs) kept in $work" >&2
exit 1
