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
               postgresql-$PG_MAJOR-plproxy  # the router of queues over several servers (README, "Scaling out")
               dpkg-dev gcc)  # apt-get source and a C compiler: PostgreSQL's regression suite (fetch_regress_suite)
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

# The pgsuite layer of `make test` (scripts/pgsuite.sh) runs PostgreSQL's own regression suite
# against a server with the library preloaded. The suite (src/test/regress) and the three C modules
# it loads (regress.so, and refint.so and autoinc.so of contrib/spi) are not in any binary package:
# they come from Debian's source package, fetched and built once per machine into PG_SOURCE_CACHE,
# outside the repository so that `cargo clean` keeps them. Only those two directories are unpacked,
# and only the three files are compiled, with the server's own flags (pgxs): no configure.
PG_SOURCE_CACHE=/var/cache/pg_jobqueue/pg$PG_MAJOR-regress
PG_SOURCE_LIST=/etc/apt/sources.list.d/pg_jobqueue-src.sources
fetch_regress_suite() {
  [ -f "$PG_SOURCE_CACHE/READY" ] && return
  log "fetching and building PostgreSQL $PG_MAJOR's regression suite (once per machine)"
  if [ ! -f "$PG_SOURCE_LIST" ]; then
    # The archive and keyring of /etc/apt/sources.list.d/debian.sources. bookworm alone: the
    # server may be bookworm-security's newer minor version, but that suite's pool did not serve
    # its source here. A suite a minor version off the server fails a few tests of its own on
    # every server alike, which the comparison of the two runs does not count.
    as_root tee "$PG_SOURCE_LIST" >/dev/null <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    as_root apt-get update -qq
  fi
  local download=$PG_SOURCE_CACHE/download
  as_root mkdir -p "$download"
  if ! ls "$download"/postgresql-"$PG_MAJOR"_*.orig.tar.bz2 >/dev/null 2>&1; then
    # As root apt warns that its sandbox user cannot write here; root downloading is what we want.
    # A list written by an interrupted setup may not have been read by apt yet: update once, retry.
    (cd "$download" && { as_root apt-get source --download-only -qq \
        -o APT::Sandbox::User=root "postgresql-$PG_MAJOR/bookworm" ||
      { as_root apt-get update -qq && as_root apt-get source --download-only -qq \
        -o APT::Sandbox::User=root "postgresql-$PG_MAJOR/bookworm"; }; })
  fi
  local tarball top
  tarball=$(ls "$download"/postgresql-"$PG_MAJOR"_*.orig.tar.bz2 | tail -n 1)
  top=$(basename "$tarball" .orig.tar.bz2 | sed "s/^postgresql-${PG_MAJOR}_/postgresql-/")
  as_root rm -rf "$PG_SOURCE_CACHE/tree" "$PG_SOURCE_CACHE/lib"
  as_root mkdir -p "$PG_SOURCE_CACHE/tree" "$PG_SOURCE_CACHE/lib"
  as_root tar -xjf "$tarball" -C "$PG_SOURCE_CACHE/tree" --strip-components=1 \
      "$top/src/test/regress" "$top/contrib/spi"
  local build
  build=$(mktemp -d)
  cp "$PG_SOURCE_CACHE/tree/src/test/regress/regress.c" "$PG_SOURCE_CACHE/tree/contrib/spi/refint.c" \
     "$PG_SOURCE_CACHE/tree/contrib/spi/autoinc.c" "$build/"
  # REFINT_VERBOSE: refint's NOTICEs, which the triggers test expects (as contrib/spi/Makefile says).
  printf 'MODULES = regress refint autoinc\nPG_CPPFLAGS = -DREFINT_VERBOSE\nPG_CONFIG = %s\nPGXS := $(shell $(PG_CONFIG) --pgxs)\ninclude $(PGXS)\n' \
    "$PG_CONFIG" > "$build/Makefile"
  # with_llvm=no: no JIT bitcode, which only the server's own inlining of its functions would use.
  make -s -C "$build" with_llvm=no >/dev/null
  as_root cp "$build/regress.so" "$build/refint.so" "$build/autoinc.so" "$PG_SOURCE_CACHE/lib/"
  rm -rf "$build"
  # The servers of the suite run as `postgres`: they read the data files and load the modules.
  as_root chmod -R a+rX "$PG_SOURCE_CACHE"
  basename "$tarball" | as_root tee "$PG_SOURCE_CACHE/READY" >/dev/null
}

install_packages
[ "$purpose" = run ] && exit 0
[ "$purpose" = test ] && install_lint_tools
[ "$purpose" = test ] && fetch_regress_suite
install_cargo_pgrx
init_pgrx
