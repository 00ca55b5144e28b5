#!/usr/bin/env bash
# The package layer of `make test`: builds the Debian packages (scripts/package.sh), removes what
# `make install` put into the system PostgreSQL, installs the packages with dpkg, and on a throwaway
# server creates the extension, upgrades a database from every frozen version, creates the router
# extension and drains a queue with /usr/bin/jq-worker. Then it takes pg_jobqueue out as the guide's
# chapter "Uninstall" gives it, with the chapter's own commands where they are shell (the blocks
# marked `package-test: NAME`): a copy of the jobs, the extension dropped in every database, the
# library taken out of a shared_preload_libraries that holds another library too, a restart, the
# packages removed with none of their files left. Then each step out of order, on a second server
# with the packages installed again: the packages removed while the setting names the library (the
# package's warning, DROP EXTENSION of pg_jobqueue and of another extension without the library,
# 0.3.0's event trigger, the start that fails and its fix). At the end it puts the `make install`
# build back.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE

. scripts/pgversion.sh
LIBDIR=$("$PG_BIN/pg_config" --pkglibdir)
EXTDIR=$("$PG_BIN/pg_config" --sharedir)/extension
PACKAGES=("postgresql-$PG-pg-jobqueue" pg-jobqueue-worker)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
passed=0
failed=0

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# check WHAT COMMAND...: one assertion, counted.
check() {
  local what=$1; shift
  if "$@"; then
    passed=$((passed + 1)); echo "ok: $what"
  else
    failed=$((failed + 1)); echo "FAILED: $what"
  fi
}

# A transcript line: the command, then what it printed.
show() {
  echo "\$ $*"
  "$@"
}

# guide_block FILE NAME: the ```sh block that follows the line `<!-- package-test: NAME -->` of FILE.
guide_block() {
  awk -v mark="<!-- package-test: $2 -->" '
    $0 == mark { found = 1; next }
    found && !inside && /^```sh$/ { inside = 1; next }
    inside && /^```$/ { exit }
    inside { print }' "$1"
}

# run_guide FILE NAME: runs that block as the guide gives it (psql finds the server in PGHOST and
# PGPORT, which the guide's commands leave to the environment), shown as a transcript.
run_guide() {
  local block
  block=$(guide_block "$1" "$2")
  if [ -z "$block" ]; then echo "$1 has no block marked package-test: $2" >&2; return 1; fi
  sed 's/^/$ /' <<<"$block"
  bash -euo pipefail -c "$block"
}

# Whatever happens, the server goes, the packages go and `make install`'s build comes back, so the
# layers after this one (and the next `make test`) find the system as `make install` left it.
data=""
restore() {
  [ -n "$data" ] && scripts/pg.sh stop "$data" >/dev/null 2>&1 || true
  for package in "${PACKAGES[@]}"; do
    if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
      as_root dpkg -r "$package" >/dev/null
    fi
  done
  echo "== the make install build put back"
  if [ -d "target/stage-debug-pg$PG" ]; then scripts/install.sh "target/stage-debug-pg$PG"; else scripts/install.sh "$(scripts/stage.sh debug)"; fi
}
trap restore EXIT

mapfile -t debs < <(scripts/package.sh)
echo "== the packages"
for deb in "${debs[@]}"; do dpkg-deb --info "$deb" | sed -n 's/^ \(Package\|Version\|Depends\|Installed-Size\):/  \1:/p'; done

# Every tag lintian knows, to the pedantic and experimental ones: each finding is fixed, or
# overridden with the reason beside it (scripts/package.sh, lintian_overrides). The overridden
# ones are shown first (O:); lintian counts them as findings when it shows them.
echo "== lintian"
lintian -EvIL +pedantic --show-overrides --tag-display-limit 0 "${debs[@]}" 2>/dev/null | grep '^O:' || true
check "lintian finds nothing that is not overridden with a reason" \
  lintian -EvIL +pedantic --tag-display-limit 0 --fail-on error,warning,info,pedantic,experimental "${debs[@]}"
check "the extension's package holds the guide the README links to" \
  bash -c 'dpkg-deb -c "$1" | grep -q "doc/postgresql-$2-pg-jobqueue/docs/src/functions.md"' \
    _ "target/debian/postgresql-$PG-pg-jobqueue_${version}_$(dpkg --print-architecture).deb" "$PG"
check "the extension's package holds the alert rules and the exporter's queries" \
  bash -c 'files=$(dpkg-deb -c "$1"); for file in alerts.yml postgres_exporter.yaml postgres_exporter_alerts.yml; do grep -q "examples/monitoring/$file$" <<<"$files" || exit 1; done' \
    _ "target/debian/postgresql-$PG-pg-jobqueue_${version}_$(dpkg --print-architecture).deb"
check "the worker's package holds jq-worker and jq-dashboard (guide, \"Install\")" \
  bash -c 'files=$(dpkg-deb -c "$1"); grep -q " ./usr/bin/jq-worker$" <<<"$files" && grep -q " ./usr/bin/jq-dashboard$" <<<"$files"' \
    _ "target/debian/pg-jobqueue-worker_${version}_$(dpkg --print-architecture).deb"
check "the licence of both packages is the PostgreSQL License" \
  bash -c 'for deb in "$@"; do dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards "./usr/share/doc/*/copyright" | grep -qx "License: PostgreSQL" || exit 1; done' _ "${debs[@]}"

echo "== what make install put there is removed, the packages installed with dpkg"
for package in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' && as_root dpkg -r "$package" >/dev/null
done
as_root rm -f "$LIBDIR"/pg_jobqueue.so "$EXTDIR"/pg_jobqueue.control "$EXTDIR"/pg_jobqueue--*.sql \
  "$EXTDIR"/pg_jobqueue_router.control "$EXTDIR"/pg_jobqueue_router--*.sql
# dpkg -i, as a DBA installs a package copied to the server (apt-get install ./FILE.deb would fetch
# what it depends on first; here postgresql-15 and the C libraries are installed already). The
# PostgreSQL 18 here is built from source by scripts/setup.sh, not Debian's package postgresql-18
# that the package depends on: dpkg is told to install it regardless, which it says.
force=()
dpkg-query -W -f='${Status}' "postgresql-$PG" 2>/dev/null | grep -q 'install ok installed' || force=(--force-depends)
show as_root dpkg "${force[@]}" -i "${debs[@]}" 2>&1 |
  grep -E '^\$|Selecting|Unpacking|Setting up|^dpkg: error|depends on' || true
check "dpkg says the library is the package's" \
  bash -c "dpkg -S '$LIBDIR/pg_jobqueue.so' | grep -q '^postgresql-$PG-pg-jobqueue:'"
check "jq-worker is in /usr/bin" test -x /usr/bin/jq-worker
check "jq-dashboard is in /usr/bin and runs" bash -c "/usr/bin/jq-dashboard --help | grep -q -- --read-only"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
parent=$(mktemp -d "${TMPDIR:-/tmp}/pg_jobqueue-package.XXXXXX")
chmod 755 "$parent"   # the server runs as postgres
data=$parent/data
# A server that preloads another library already, as a DBA's does: pg_jobqueue is added to the
# list with the guide's statement ("Set up"), not set in its place. A setting of the extension in
# postgresql.conf stays there after the uninstall, as the guide says it may.
other=pg_stat_statements
[ -f "$LIBDIR/$other.so" ] || other=pg_cron
scripts/pg.sh start "$data" "$port" "shared_preload_libraries = '$other'" "pg_jobqueue.max_workers = 4"
export PGHOST=127.0.0.1 PGPORT=$port PGUSER=postgres PATH="$PG_BIN:$PATH"
echo "== pg_jobqueue added to shared_preload_libraries (guide, \"Set up\")"
run_guide docs/src/setup.md preload
scripts/pg.sh halt "$data"
scripts/pg.sh start "$data" "$port"
psql_in() {
  local db=$1; shift
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$db" "$@"
}
sql() { psql_in postgres -At -c "$1"; }
check "shared_preload_libraries is the list it was, and pg_jobqueue" \
  test "$(sql "SHOW shared_preload_libraries")" = "$other, pg_jobqueue"

echo "== a server that loads the packaged library"
echo "\$ psql -c 'CREATE EXTENSION pg_jobqueue'"
psql_in postgres -c "CREATE EXTENSION pg_jobqueue" -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_jobqueue'" \
  -c "SELECT jq_enqueue('emails', '{\"to\": \"ada@example.com\"}') AS id" \
  -c "SELECT id, lease_token FROM jq_claim('emails', 'worker-1')"
check "CREATE EXTENSION makes version $version" test "$(sql "SELECT extversion FROM pg_extension WHERE extname = 'pg_jobqueue'")" = "$version"
check "the claimed job completes" test "$(sql "SELECT jq_complete(id, 'worker-1', lease_token) FROM jq_jobs WHERE queue_name = 'emails'")" = t
check "the background reaper runs on the packaged library" \
  test "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue launcher'")" = 1

for script in sql/released/pg_jobqueue--*.sql; do
  old=${script#sql/released/pg_jobqueue--}; old=${old%.sql}
  db=upgrade_${old//./_}
  sql "CREATE DATABASE $db" >/dev/null
  # A job as that release left it: its functions refuse to run on the new library until the update.
  # Before 0.3.0 jobs were rows of the table jq_jobs; since, of jq_live_jobs under a queue number.
  psql_in "$db" -c "CREATE EXTENSION pg_jobqueue VERSION '$old'" \
    -c "DO \$\$ BEGIN
          IF to_regclass('jq_live_jobs') IS NULL THEN
            INSERT INTO jq_jobs (queue_name, payload, available_at, max_attempts, created_at)
            VALUES ('kept', '{}', now(), 8, now());
          ELSE
            INSERT INTO jq_queue_ids (queue_name) VALUES ('kept');
            INSERT INTO jq_live_jobs (queue_id, payload, available_at, max_attempts, created_at)
            SELECT queue_id, '{}', now(), 8, now() FROM jq_queue_ids WHERE queue_name = 'kept';
          END IF;
        END \$\$" >/dev/null
  psql_in "$db" -c "ALTER EXTENSION pg_jobqueue UPDATE" 2>&1 | grep -v '^WARNING' || true
  check "a database on $old upgrades to $version with its job" \
    test "$(psql_in "$db" -At -c "SELECT extversion || ' ' || (SELECT count(*) FROM jq_jobs WHERE queue_name = 'kept')
                                   FROM pg_extension WHERE extname = 'pg_jobqueue'")" = "$version 1"
done

if [ -f "$EXTDIR/plproxy.control" ]; then
  sql "CREATE DATABASE router" >/dev/null
  psql_in router -c "CREATE EXTENSION plproxy" -c "CREATE SCHEMA jobqueue" \
    -c "CREATE EXTENSION pg_jobqueue_router SCHEMA jobqueue" >/dev/null
  check "the router extension installs" \
    test "$(psql_in router -At -c "SELECT extversion FROM pg_extension WHERE extname = 'pg_jobqueue_router'")" = "$version"
else
  echo "(the router extension is not created: PL/Proxy is not installed for PostgreSQL $PG)"
fi

sql "SELECT jq_enqueue_batch('packaged', array_fill('{}'::jsonb, ARRAY[5]))" >/dev/null
/usr/bin/jq-worker --dsn "host=127.0.0.1 port=$port user=postgres dbname=postgres" --queue packaged \
  --wait 0.2 --once-empty -- cat >/dev/null 2>&1
check "/usr/bin/jq-worker drains a queue" \
  test "$(sql "SELECT count(*) FROM jq_jobs WHERE queue_name = 'packaged' AND status = 'succeeded'")" = 5

echo "== uninstall, in order (guide, \"Uninstall\")"
# An application's database: jobs, and a live lease (a claimed job whose worker has not completed
# it); beside it postgres and the databases upgraded above, with theirs, and the router's.
sql "CREATE DATABASE app" >/dev/null
psql_in app -c "CREATE EXTENSION pg_jobqueue" \
  -c "SELECT jq_enqueue_batch('emails', array_fill('{\"to\": \"ada@example.com\"}'::jsonb, ARRAY[3]))" >/dev/null
read -r -a lease <<<"$(psql_in app -At -F ' ' -c "SELECT id, lease_token FROM jq_claim('emails', 'worker-1')")"
check "a job of app is leased" test "${#lease[@]}" -eq 2

listed=$(run_guide docs/src/uninstall.md databases)
echo "$listed"
check "the guide's list names app, postgres and the router's database" \
  bash -c 'grep -qx "app: pg_jobqueue $2" <<<"$1" && grep -qx "postgres: pg_jobqueue $2" <<<"$1" &&
           { [ ! -f "$3" ] || grep -qx "router: pg_jobqueue_router $2" <<<"$1"; }' \
    _ "$listed" "$version" "$EXTDIR/plproxy.control"

copies=$(mktemp -d "${TMPDIR:-/tmp}/pg_jobqueue-copies.XXXXXX")
(cd "$copies" && run_guide "$OLDPWD/docs/src/uninstall.md" copy)
check "the copy holds app's 3 jobs, the leased one running" \
  bash -c '[ "$(tail -n +2 "$1/app-jq_jobs.csv" | wc -l)" -eq 3 ] && grep -q ",running," "$1/app-jq_jobs.csv"' _ "$copies"
check "the dump holds the rows of the extension's tables" \
  bash -c 'pg_restore -l "$1/app.dump" | grep -q "TABLE DATA public jq_live_jobs "' _ "$copies"

# An object of the DBA's that depends on the extension stops the guide's loop, with PostgreSQL's
# message, which the guide quotes.
psql_in app -c "CREATE VIEW my_jobs AS SELECT id, status FROM jq_jobs" >/dev/null
refused=0
dropping=$(run_guide docs/src/uninstall.md drop 2>&1) || refused=$?
grep -v '^\$' <<<"$dropping" || true
check "the loop stops where a view of the DBA's depends on the extension" \
  bash -c '[ "$2" -ne 0 ] && grep -q "ERROR:  cannot drop extension pg_jobqueue because other objects depend on it" <<<"$1" &&
           grep -q "DETAIL:  view my_jobs depends on view jq_jobs" <<<"$1"' _ "$dropping" "$refused"
psql_in app -c "DROP VIEW my_jobs" >/dev/null

run_guide docs/src/uninstall.md drop
left=""
while IFS= read -r db; do
  left+=$(psql_in "$db" -At -c "SELECT current_database() || ' ' || extname || ' ' FROM pg_extension WHERE extname LIKE 'pg_jobqueue%'")
done < <(sql "SELECT datname FROM pg_database WHERE datallowconn")
check "no database has pg_jobqueue or its router${left:+ (left: $left)}" test -z "$left"
# The background worker leaves each database as its extension goes (guide, "Maintenance").
reapers() { sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue reaper'"; }
for _ in $(seq 120); do [ "$(reapers)" = 0 ] && break; sleep 0.5; done
check "no background worker serves a database any more" test "$(reapers)" = 0
# As a worker calls it, with its arguments typed.
echo "\$ psql -d app -c \"SELECT jq_complete(${lease[0]}::bigint, 'worker-1', ${lease[1]}::bigint)\""
completed=$(psql_in app -c "SELECT jq_complete(${lease[0]}::bigint, 'worker-1', ${lease[1]}::bigint)" 2>&1 || true)
echo "$completed"
check "the worker that held the lease is told its function is gone" \
  bash -c 'grep -q "ERROR:  function jq_complete(bigint, unknown, bigint) does not exist" <<<"$1"' _ "$completed"

run_guide docs/src/uninstall.md unpreload
check "ALTER SYSTEM wrote the list without pg_jobqueue" \
  grep -qx "shared_preload_libraries = '$other'" "$data/postgresql.auto.conf"
echo "\$ (restart)"
scripts/pg.sh halt "$data"
scripts/pg.sh start "$data" "$port"
check "after the restart the other library is preloaded, alone" test "$(sql "SHOW shared_preload_libraries")" = "$other"
check "no launcher of pg_jobqueue runs" \
  test "$(sql "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'pg_jobqueue launcher'")" = 0

# The clusters the package's prerm looks into (postgresql-common's layout, PG_CLUSTER_CONF_ROOT):
# one, this server.
confroot=$parent/etc
mkdir -p "$confroot/$PG/test"
echo "data_directory = '$data'" > "$confroot/$PG/test/postgresql.conf"
mapfile -t files < <(dpkg -L "${PACKAGES[@]}" | while read -r f; do [ -f "$f" ] && echo "$f"; done)
echo "\$ dpkg --purge ${PACKAGES[*]}"
removal=$(as_root env PG_CLUSTER_CONF_ROOT="$confroot" dpkg --purge "${PACKAGES[@]}" 2>&1)
grep -E '^(Removing|Purging)|warning' <<<"$removal" || true
check "removing the packages warns of nothing: no cluster preloads pg_jobqueue" \
  bash -c '! grep -q "still preloads" <<<"$1"' _ "$removal"
left=()
for f in "${files[@]}"; do [ -e "$f" ] && left+=("$f"); done
check "no file of the packages is left (${#files[@]} installed)" test "${#left[@]}" -eq 0
scripts/pg.sh halt "$data"
scripts/pg.sh start "$data" "$port"
check "the server starts without the packages, a setting of the extension left in postgresql.conf" \
  test "$(sql "SHOW pg_jobqueue.max_workers")" = 4
scripts/pg.sh stop "$data"
rm -rf "$copies"

echo "== out of order (guide, \"Uninstall\", \"Out of order\"): the packages installed again"
as_root dpkg "${force[@]}" -i "${debs[@]}" >/dev/null 2>&1
another=pg_trgm
[ -f "$EXTDIR/$another.control" ] || another=pg_stat_statements
scripts/pg.sh start "$data" "$port" "shared_preload_libraries = '$other'"
run_guide docs/src/setup.md preload >/dev/null
scripts/pg.sh halt "$data"
scripts/pg.sh start "$data" "$port"
sql "CREATE DATABASE app" >/dev/null
sql "CREATE DATABASE old" >/dev/null
psql_in app -c "CREATE EXTENSION pg_jobqueue" -c "CREATE EXTENSION $another" -c "SELECT jq_enqueue('emails', '{}')" >/dev/null
psql_in old -c "CREATE EXTENSION pg_jobqueue VERSION '0.3.0'" -c "CREATE EXTENSION $another" >/dev/null

echo "-- the packages removed while the server preloads the library"
echo "\$ dpkg -r ${PACKAGES[*]}"
removal=$(as_root env PG_CLUSTER_CONF_ROOT="$confroot" dpkg -r "${PACKAGES[@]}" 2>&1)
grep -E '^Removing|warning|^  ' <<<"$removal" || true
check "removing the package warns that the cluster still preloads pg_jobqueue, naming the file" \
  bash -c 'grep -q "warning: the cluster $2/test still preloads pg_jobqueue" <<<"$1" &&
           grep -q "postgresql.auto.conf: shared_preload_libraries" <<<"$1"' _ "$removal" "$PG"
check "the library's file is gone" test ! -e "$LIBDIR/pg_jobqueue.so"
check "the running server runs on" test "$(sql "SELECT 1")" = 1
echo "\$ psql -d app -c \"SELECT jq_enqueue('emails', '{}')\""
called=$(psql_in app -c "SELECT jq_enqueue('emails', '{}')" 2>&1 || true)
echo "$called"
# PostgreSQL 18 names the file without its `$libdir/`.
gone='ERROR:  could not access file "(\$libdir/)?pg_jobqueue": No such file or directory'
check "a call of the extension's functions fails: the library's file is gone" \
  bash -c 'grep -qE "$2" <<<"$1"' _ "$called" "$gone"
echo "\$ psql -d app -c 'DROP EXTENSION $another' -c 'DROP EXTENSION pg_jobqueue'"
check "DROP EXTENSION $another works without the library" psql_in app -c "DROP EXTENSION $another"
check "DROP EXTENSION pg_jobqueue works without the library" psql_in app -c "DROP EXTENSION pg_jobqueue"
echo "\$ psql -d old -c 'DROP EXTENSION $another'"
dropped=$(psql_in old -c "DROP EXTENSION $another" 2>&1 || true)
echo "$dropped"
check "on 0.3.0's definitions DROP EXTENSION $another fails: the event trigger is the library's" \
  bash -c 'grep -qE "$2" <<<"$1"' _ "$dropped" "$gone"
run_guide docs/src/uninstall.md old-trigger
check "with 0.3.0's event trigger off, pg_jobqueue is dropped" \
  test "$(psql_in old -At -c "SELECT count(*) FROM pg_extension WHERE extname = 'pg_jobqueue'")" = 0
check "and so is $another" psql_in old -c "DROP EXTENSION $another"

echo "-- the next start, with the setting left"
scripts/pg.sh halt "$data"
started=yes
scripts/pg.sh start "$data" "$port" 2>/dev/null || started=no
grep 'FATAL' "$data/server.log" | tail -n 1 | sed 's/^.*FATAL/FATAL/' || true
check "the server does not start: the preloaded library's file is gone" test "$started" = no
check "its log says which file" \
  grep -qF 'FATAL:  could not access file "pg_jobqueue": No such file or directory' "$data/server.log"
echo "\$ (pg_jobqueue taken out of the line of postgresql.auto.conf by hand)"
as_root sed -i "s/^shared_preload_libraries = '$other, pg_jobqueue'\$/shared_preload_libraries = '$other'/" \
  "$data/postgresql.auto.conf"
grep '^shared_preload_libraries' "$data/postgresql.auto.conf"
scripts/pg.sh start "$data" "$port"
check "with pg_jobqueue out of postgresql.auto.conf the server starts" \
  test "$(sql "SHOW shared_preload_libraries")" = "$other"
scripts/pg.sh stop "$data"
data=""
rm -rf "$parent"

echo "test result: package. $passed passed; $failed failed"
[ "$failed" -eq 0 ]
