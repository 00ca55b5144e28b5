#!/usr/bin/env bash
# Runs the test layers: `lint` (formatting, clippy, code rules: scripts/lint.sh), `unit` (#[pg_test]
# inside a pgrx-managed server), `regress` (pg_regress: SQL
# files and their expected output), `pgsuite` (PostgreSQL's own regression suite, without the
# library preloaded and with it: scripts/pgsuite.sh), `isolation` (PostgreSQL's isolation tester), `integration`
# (several connections to real throwaway servers), `cluster` (the part of `integration` with
# several servers: failover to a streaming standby, and the router over three servers), `browser`
# (jq-dashboard's pages in headless Chromium, driven through chromedriver), `package` (the Debian packages, installed with
# dpkg and removed again), `readme` (every SQL example of README.md and of the guide, with its
# output), `docs` (the guide's links, language, reference and book), `all`, or
# `core`: unit, regress, isolation, readme, the fault suite and `pg_upgrade` (a 15 cluster
# upgraded to 18): what `make test` runs on 18 after every layer on 15 (DEVELOPMENT.md, "Server
# versions").
# Against the PostgreSQL version PG names (15 unless set; scripts/pgversion.sh). Expects the
# extension to be installed for it.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE   # it would put backtraces into error DETAIL lines
. scripts/pgversion.sh

layer=${1:-all}
started=$SECONDS
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# `cargo pgrx test` installs a build with the test functions (a `tests` schema) into the system
# PostgreSQL, rewriting the library in place (so no other server should run during this layer).
# Put the plain build back, by rename, so the other layers test what users get and `make test`
# leaves no test code installed.
install_plain() {
  local stage
  stage=$(scripts/stage.sh debug)
  scripts/install.sh "$stage"
}

unit() {
  echo "== unit and plan tests (#[pg_test])"
  if [ "$(id -u)" -eq 0 ]; then
    # PostgreSQL will not run as root: the test server runs as `postgres`, in a directory it owns.
    local parent=${TMPDIR:-/tmp}/pg_jobqueue-pgrx-test
    rm -rf "$parent"; mkdir -p "$parent"; chown postgres: "$parent"
    cargo pgrx test "pg$PG" --runas postgres --pgdata "$parent/data" 2>&1 | tee -a "$log"
  else
    cargo pgrx test "pg$PG" 2>&1 | tee -a "$log"
  fi
  install_plain
}

# The verdicts pg_regress and pg_isolation_regress print, one line per test: 15 prints
# "test NAME ... ok" (or FAILED), 16 and later "ok N - NAME" (or "not ok N - NAME").
passed_in() { grep -cE '^test .* \.\.\. ok|^ok [0-9]+ ' "$1" || true; }
failed_in() { grep -cE '^test .* \.\.\. FAILED|^not ok [0-9]+ ' "$1" || true; }

# PostgreSQL's pg_regress: each file of tests/pg_regress/sql runs in psql, and its output must match
# tests/pg_regress/expected exactly, on a temporary server that pg_regress starts itself. The files
# show every bad-input case and SQLSTATE of the README's function sections as a reader sees them.
regress() {
  echo "== regression tests (pg_regress)"
  local pgxs=$PG_PGXS/src/test/regress
  # The schedule fixes the order (setup, which creates the extension, first); a file it does not
  # list would never run, so such a file fails the layer.
  # utility_errors runs on its own, twice (below).
  local name missing=()
  for name in tests/pg_regress/sql/*.sql; do
    name=$(basename "$name" .sql)
    [ "$name" = utility_errors ] && continue
    grep -qx "test: $name" tests/pg_regress/schedule || missing+=("$name")
  done
  if [ "${#missing[@]}" -ne 0 ]; then
    echo "tests/pg_regress/schedule does not list: ${missing[*]}" >&2
    echo "test result: regress. 0 passed; ${#missing[@]} failed" >> "$log"
    return 1
  fi
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/pg_jobqueue-regress.XXXXXX")
  cp -r tests/pg_regress/sql tests/pg_regress/expected tests/pg_regress/schedule "$work/"
  local run=()
  if [ "$(id -u)" -eq 0 ]; then chown -R postgres: "$work"; run=(runuser -u postgres --); fi
  local status=0
  # --no-locale and UTF8: messages in English and the same encoding, whatever the caller's locale.
  (cd "$work" && "${run[@]}" "$pgxs/pg_regress" --temp-instance="$work/instance" \
      --bindir="$PG_BIN" --inputdir="$work" --outputdir="$work" \
      --no-locale --encoding=UTF8 --schedule="$work/schedule") 2>&1 | tee "$work/summary" || status=$?
  [ -f "$work/regression.diffs" ] && cat "$work/regression.diffs"
  # Utility errors must be the server's own, field for field, whether the library is preloaded or
  # not: the same file and the same expected output on a server without it, then on one that
  # preloads it (whose worker then serves the test database).
  printf "%s\n" "shared_preload_libraries = 'pg_jobqueue'" "pg_jobqueue.reaper_interval = '100ms'" \
    > "$work/preload.conf"
  local config
  for config in none preload; do
    local extra=()
    [ "$config" = preload ] && extra=(--temp-config="$work/preload.conf")
    rm -rf "$work/instance"
    (cd "$work" && "${run[@]}" "$pgxs/pg_regress" --temp-instance="$work/instance" "${extra[@]}" \
        --bindir="$PG_BIN" --inputdir="$work" --outputdir="$work/$config" \
        --no-locale --encoding=UTF8 utility_errors) 2>&1 | sed "s/utility_errors/utility_errors ($config)/" \
        | tee -a "$work/summary" || status=$?
    [ -f "$work/$config/regression.diffs" ] && cat "$work/$config/regression.diffs"
  done
  # pg_regress prints a verdict per file; count them for the closing line.
  local passed failed
  passed=$(passed_in "$work/summary")
  failed=$(failed_in "$work/summary")
  echo "test result: regress. $passed passed; $failed failed" >> "$log"
  if [ "$status" -ne 0 ]; then
    echo "regression tests failed; outputs kept in $work" >&2
    return "$status"
  fi
  rm -rf "$work"
}

# PostgreSQL's own regression suite on a server without the library preloaded and on one with it
# and its worker serving the suite's database: preloading must change no test's outcome
# (scripts/pgsuite.sh, which prints its own closing line).
pgsuite() {
  echo "== PostgreSQL's regression suite, without and with the library preloaded (scripts/pgsuite.sh)"
  scripts/pgsuite.sh 2>&1 | tee -a "$log"
}

# PostgreSQL's isolation tester: sessions, steps and permutations with expected output
# (tests/isolation), on a temporary server that pg_isolation_regress starts itself.
isolation() {
  echo "== isolation tests (pg_isolation_regress)"
  local pgxs=$PG_PGXS/src/test/isolation
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/pg_jobqueue-isolation.XXXXXX")
  cp -r tests/isolation/specs tests/isolation/expected "$work/"
  local specs
  specs=$(cd tests/isolation/specs && ls ./*.spec | sed 's|^\./||; s|\.spec$||')
  local run=()
  if [ "$(id -u)" -eq 0 ]; then chown -R postgres: "$work"; run=(runuser -u postgres --); fi
  local status=0
  (cd "$work" && "${run[@]}" "$pgxs/pg_isolation_regress" --temp-instance="$work/instance" \
      --bindir="$PG_BIN" --inputdir="$work" --outputdir="$work" \
      --load-extension=pg_jobqueue $specs) 2>&1 | tee "$work/summary" || status=$?
  [ -f "$work/regression.diffs" ] && cat "$work/regression.diffs"
  # pg_isolation_regress prints a verdict per spec; count them for the closing line.
  local passed failed
  passed=$(passed_in "$work/summary")
  failed=$(failed_in "$work/summary")
  echo "test result: isolation. $passed passed; $failed failed" >> "$log"
  if [ "$status" -ne 0 ]; then
    echo "isolation tests failed; outputs kept in $work" >&2
    return "$status"
  fi
  rm -rf "$work"
}

# Whether the server version under test has an extension: Debian 12 packages PL/Proxy and pg_cron
# for 15 only; for 18 neither their sources nor binaries built for this C library were reachable
# here (DEVELOPMENT.md, "Server versions").
installed() { [ -f "$("$PG_CONFIG" --sharedir)/extension/$1.control" ]; }

# The harness's test files but pg_upgrade.rs (a layer of its own, which needs the build of both
# versions) and dashboard.rs (the browser layer, which needs jq-dashboard built and Chromium), and
# the router's (router.rs) where PL/Proxy is missing; and the test of reaping through pg_cron where
# pg_cron is. Said, not hidden.
harness_targets() {
  installed plproxy || echo "(router tests left out: PL/Proxy is not installed for PostgreSQL $PG)" >&2
  local file name
  for file in tests/harness/tests/*.rs; do
    name=$(basename "$file" .rs)
    [ "$name" = pg_upgrade ] && continue
    [ "$name" = dashboard ] && continue
    [ "$name" = router ] && ! installed plproxy && continue
    echo "--test $name"
  done
}
harness_skips() {
  installed pg_cron && return
  echo "(pg_cron_schedules_the_reaper left out: pg_cron is not installed for PostgreSQL $PG)" >&2
  echo "--skip pg_cron_schedules_the_reaper"
}

integration() {
  echo "== integration tests (real server, many connections)"
  # The update under its readers (upgrade_readers.rs) runs jq-dashboard as one of them.
  cargo build -q -p jq-dashboard 2>&1 | tee -a "$log"
  # shellcheck disable=SC2046
  cargo test -p jq-harness $(harness_targets) -- --test-threads=1 $(harness_skips) 2>&1 | tee -a "$log"
  cargo test -p jq-worker --tests -- --test-threads=1 2>&1 | tee -a "$log"
}

# The randomized fault history and the crash tests: what every server version must survive.
faults() {
  echo "== fault suite (real server: crashes, restarts, a randomized history)"
  cargo test -p jq-harness --test faults --test durability -- --test-threads=1 2>&1 | tee -a "$log"
}

# A populated 15 cluster upgraded to 18 with pg_upgrade (tests/harness/tests/pg_upgrade.rs); needs
# the library installed for both.
pg_upgrade() {
  echo "== pg_upgrade from PostgreSQL 15 to 18"
  cargo test -p jq-harness --test pg_upgrade -- --test-threads=1 2>&1 | tee -a "$log"
}

# jq-dashboard: its own tests (dashboard/src and dashboard/tests: arguments, CSRF, the plans of
# its statements on a filled database, its answers over HTTP, and monitoring/alerts.yml under
# promtool on the series its /metrics serves for several databases), then the program in a real browser
# (tests/harness/tests/dashboard.rs), which runs the binary built first; Debian's chromium and
# chromium-driver drive it (scripts/setup.sh test), and the screenshots of its pages are left in
# target/screenshots.
browser() {
  echo "== dashboard tests, and the dashboard in headless Chromium through chromedriver"
  cargo test -p jq-dashboard -- --test-threads=1 2>&1 | tee -a "$log"
  cargo build -p jq-dashboard 2>&1 | tee -a "$log"
  cargo test -p jq-harness --test dashboard -- --test-threads=1 2>&1 | tee -a "$log"
}

cluster() {
  echo "== cluster tests (a primary and its standby; a router and three servers)"
  cargo test -p jq-worker --test failover -- --test-threads=1 2>&1 | tee -a "$log"
  if installed plproxy; then
    cargo test -p jq-harness --test router -- --test-threads=1 2>&1 | tee -a "$log"
  else
    echo "(router tests left out: PL/Proxy is not installed for PostgreSQL $PG)"
  fi
}

# The Debian packages: built, installed with apt, used, upgraded from every frozen version, and
# removed (scripts/package_test.sh).
package() {
  echo "== package (make package, installed with dpkg, then removed)"
  scripts/package_test.sh 2>&1 | tee -a "$log"
}

# Every SQL example of README.md and of the guide, run in order on a fresh server per document,
# with its shown output compared (tests/readme/check.py).
readme() {
  echo "== README and guide examples (tests/readme/check.py)"
  /usr/bin/python3 tests/readme/check.py 2>&1 | tee -a "$log"
}

# The user docs: links and language (scripts/docs.py), the reference against the catalog
# (tests/readme/reference.py), and the guide built as a book (mdbook, into docs/book).
docs() {
  echo "== docs (scripts/docs.py links and language, mdbook build, tests/readme/reference.py, scripts/versions.py)"
  local passed=0 failed=0 step
  for step in "python3 scripts/docs.py links" "python3 scripts/docs.py language" "mdbook build docs"; do
    if $step 2>&1 | tee -a "$log"; then
      passed=$((passed + 1))
    else
      failed=$((failed + 1)); echo "FAILED: $step"
    fi
  done
  echo "test result: docs. $passed passed; $failed failed" | tee -a "$log"
  /usr/bin/python3 tests/readme/reference.py 2>&1 | tee -a "$log"
  # The versions the docs name, and the CHANGELOG's releases (scripts/versions.py).
  python3 scripts/versions.py 2>&1 | tee -a "$log"
  [ "$failed" -eq 0 ]
}

lint() {
  echo "== lint (rustfmt, clippy, code rules)"
  scripts/lint.sh 2>&1 | tee -a "$log"
}

# Runs one layer and says how long it took (DEVELOPMENT.md, "Test layers", lists what each costs).
timed() {
  local layer_started=$SECONDS
  "$1"
  echo "== layer $1 took $((SECONDS - layer_started)) s"
}

case "$layer" in
  lint) timed lint ;;
  unit) timed unit ;;
  integration) timed integration ;;
  cluster) timed cluster ;;
  browser) timed browser ;;
  package) timed package ;;
  readme) timed readme ;;
  docs) timed docs ;;
  regress) timed regress ;;
  pgsuite) timed pgsuite ;;
  isolation) timed isolation ;;
  faults) timed faults ;;
  pg_upgrade) timed pg_upgrade ;;
  all) timed lint; timed unit; timed regress; timed pgsuite; timed isolation; timed readme; timed docs; timed integration; timed browser; timed package
       if [ "$PG" = 18 ]; then timed pg_upgrade; fi ;;
  core) timed unit; timed regress; timed isolation; timed readme; timed faults; timed pg_upgrade ;;
  *) echo "usage: test.sh lint|unit|regress|pgsuite|isolation|readme|docs|integration|browser|faults|pg_upgrade|cluster|package|all|core" >&2; exit 2 ;;
esac
# One closing line for every layer together, summed from cargo's per-binary results.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed (PostgreSQL %s)\n", p, f, pg }' pg="$PG" "$log"
echo "== test layers '$layer' on PostgreSQL $PG finished in $((SECONDS - started)) s"
