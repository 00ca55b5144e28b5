#!/usr/bin/env bash
# The package layer of `make test`: builds the Debian packages (scripts/package.sh), removes what
# `make install` put into the system PostgreSQL, installs the packages with dpkg, and on a throwaway
# server creates the extension, upgrades a database from every frozen version, creates the router
# extension and drains a queue with /usr/bin/jq-worker. Then it removes the packages, checks that
# none of their files is left, and puts the `make install` build back.
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
scripts/pg.sh start "$data" "$port" "shared_preload_libraries = 'pg_jobqueue'"
psql_in() {
  local db=$1; shift
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d "$db" "$@"
}
sql() { psql_in postgres -At -c "$1"; }

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
scripts/pg.sh stop "$data"
data=""
rmdir "$parent"

echo "== removed again"
mapfile -t files < <(dpkg -L "${PACKAGES[@]}" | while read -r f; do [ -f "$f" ] && echo "$f"; done)
show as_root dpkg -r "${PACKAGES[@]}" | grep -E '^\$|Removing' || true
left=()
for f in "${files[@]}"; do [ -e "$f" ] && left+=("$f"); done
check "no file of the packages is left (${#files[@]} installed)" test "${#left[@]}" -eq 0

echo "test result: package. $passed passed; $failed failed"
[ "$failed" -eq 0 ]
