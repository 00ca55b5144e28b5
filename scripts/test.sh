#!/usr/bin/env bash
# Runs the test layers: `unit` (#[pg_test] inside a pgrx-managed server), `integration` (several
# connections to a real throwaway server), or `all`. Expects the extension to be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
unset RUST_BACKTRACE   # it would put backtraces into error DETAIL lines

layer=${1:-all}
started=$SECONDS

unit() {
  echo "== unit and plan tests (#[pg_test])"
  if [ "$(id -u)" -eq 0 ]; then
    # PostgreSQL will not run as root: the test server runs as `postgres`, in a directory it owns.
    local parent=${TMPDIR:-/tmp}/pg_jobqueue-pgrx-test
    rm -rf "$parent"; mkdir -p "$parent"; chown postgres: "$parent"
    cargo pgrx test pg15 --runas postgres --pgdata "$parent/data"
  else
    cargo pgrx test pg15
  fi
}

integration() {
  echo "== integration tests (real server, many connections)"
  cargo test -p jq-harness -- --test-threads=1
}

case "$layer" in
  unit) unit ;;
  integration) integration ;;
  all) unit; integration ;;
  *) echo "usage: test.sh unit|integration|all" >&2; exit 2 ;;
esac
echo "== test layers '$layer' finished in $((SECONDS - started)) s"
