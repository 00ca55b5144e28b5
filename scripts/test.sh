#!/usr/bin/env bash
# Runs the test layers: `unit` (#[pg_test] inside a pgrx-managed server), `integration` (several
# connections to a real throwaway server), or `all`. Expects the extension to be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE   # it would put backtraces into error DETAIL lines

layer=${1:-all}
started=$SECONDS
log=$(mktemp)
trap 'rm -f "$log"' EXIT

unit() {
  echo "== unit and plan tests (#[pg_test])"
  if [ "$(id -u)" -eq 0 ]; then
    # PostgreSQL will not run as root: the test server runs as `postgres`, in a directory it owns.
    local parent=${TMPDIR:-/tmp}/pg_jobqueue-pgrx-test
    rm -rf "$parent"; mkdir -p "$parent"; chown postgres: "$parent"
    cargo pgrx test pg15 --runas postgres --pgdata "$parent/data" 2>&1 | tee -a "$log"
  else
    cargo pgrx test pg15 2>&1 | tee -a "$log"
  fi
}

integration() {
  echo "== integration tests (real server, many connections)"
  cargo test -p jq-harness --tests -- --test-threads=1 2>&1 | tee -a "$log"
}

case "$layer" in
  unit) unit ;;
  integration) integration ;;
  all) unit; integration ;;
  *) echo "usage: test.sh unit|integration|all" >&2; exit 2 ;;
esac
# One closing line for every layer together, summed from cargo's per-binary results.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed/) p += $(i-1); if ($i ~ /^failed/) f += $(i-1) } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
echo "== test layers '$layer' finished in $((SECONDS - started)) s"
