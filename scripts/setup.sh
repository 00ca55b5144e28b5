#!/usr/bin/env bash
# Installs what pg_jobqueue needs for a purpose, and only what is missing:
#   scripts/setup.sh run     what running it needs: PostgreSQL 15 (and PL/Proxy, for the router of
#                            README "Scaling out"); the packages of `make package` depend on no more
#   scripts/setup.sh build   what building and installing needs (make install, make package)
#   scripts/setup.sh test    that, and what the tests, the demo and the benchmarks use (the default)
# Every make target calls this; on a machine that has everything it takes a second or two.
set -euo pipefail

PG_MAJOR=15
PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
PGRX_VERSION=0.18.1
purpose=${1:-test}
BUILD_PACKAGES=(postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libclang-dev clang pkg-config sudo)
TEST_PACKAGES=(postgresql-$PG_MAJOR-cron  # pg_cron, for reaping through it
               curl python3  # curl and python3: make bench
               python3-psycopg pgbouncer python3-prometheus-client  # the Python worker example, the PgBouncer test, the metrics parser
               postgresql-$PG_MAJOR-plproxy)  # the router of queues over several servers (README, "Scaling out")
case "$purpose" in
  run) DEB_PACKAGES=(postgresql-$PG_MAJOR postgresql-$PG_MAJOR-plproxy) ;;
  build) DEB_PACKAGES=("${BUILD_PACKAGES[@]}") ;;
  test) DEB_PACKAGES=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "usage: setup.sh run|build|test" >&2; exit 2 ;;
esac

log() { printf '[setup] %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

missing_packages() {
  local p
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || printf '%s ' "$p"
  done
}

install_packages() {
  local missing
  missing=$(missing_packages)
  [ -z "$missing" ] && return
  log "installing Debian packages: $missing"
  as_root apt-get update -qq
  # shellcheck disable=SC2086
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
}

install_cargo_pgrx() {
  if cargo pgrx --version 2>/dev/null | grep -q "$PGRX_VERSION"; then return; fi
  log "building cargo-pgrx $PGRX_VERSION (10-17 minutes, once per machine)"
  cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
}

init_pgrx() {
  local config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
  if [ -f "$config" ] && grep -q "pg$PG_MAJOR = \"$PG_CONFIG\"" "$config"; then return; fi
  log "cargo pgrx init against the system PostgreSQL $PG_MAJOR"
  cargo pgrx init --pg$PG_MAJOR "$PG_CONFIG"
}

# The lint layer of `make test` runs rustfmt and clippy: components of the toolchain, which a
# minimal rustup profile leaves out.
install_lint_tools() {
  if cargo fmt --version >/dev/null 2>&1 && cargo clippy --version >/dev/null 2>&1; then return; fi
  log "adding rustfmt and clippy to the Rust toolchain"
  rustup component add rustfmt clippy
}

install_packages
[ "$purpose" = run ] && exit 0
[ "$purpose" = test ] && install_lint_tools
install_cargo_pgrx
init_pgrx
