#!/usr/bin/env bash
# Installs what pg_jobqueue needs for a purpose, and only what is missing:
#   scripts/setup.sh run     what running it needs: PostgreSQL 15 (and PL/Proxy, for the router of
#                            guide "Scaling out"); the packages of `make package` depend on no more
#   scripts/setup.sh build   what building and installing needs (make install, make package), and
#                            so all that `make demo` needs: PostgreSQL 15, its headers, clang
#   scripts/setup.sh test    that, and what the tests and the benchmarks use (the default):
#                            cargo-pgrx, PostgreSQL 18, the regression suites, Chromium, mdBook...
# Every make target calls this; on a machine that has everything it takes a second or two.
# PostgreSQL 15 comes from Debian's packages; PostgreSQL 18, which Debian 12 does not package, is
# built once per machine from Debian's source package (build_postgresql_18) for `build` and `test`.
set -euo pipefail
cd "$(dirname "$0")/.."   # rust-toolchain.toml applies inside the repository

PG_MAJOR=15
PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
# Laid out as Debian's postgresql-18 package lays it out (programs and libraries under
# /usr/lib/postgresql/18, shared files in /usr/share/postgresql/18), so that every script finds a
# version's programs in one place and the package built for 18 installs where Debian's server looks.
PG18=/usr/lib/postgresql/18
PG18_BUILD_CACHE=/var/cache/pg_jobqueue/pg18-build
PGRX_VERSION=0.18.1
purpose=${1:-test}
BUILD_PACKAGES=(postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR libclang-dev clang pkg-config sudo
                dpkg-dev gcc make)
PG18_BUILD_PACKAGES=(bison flex libreadline-dev zlib1g-dev libicu-dev)  # what building PostgreSQL 18 takes besides
TEST_PACKAGES=(postgresql-$PG_MAJOR-cron  # pg_cron, for reaping through it
               curl python3  # curl and python3: make bench
               python3-psycopg pgbouncer python3-prometheus-client  # the Python worker example, the PgBouncer test, the metrics parser
               postgresql-$PG_MAJOR-plproxy  # the router of queues over several servers (guide, "Scaling out")
               lintian  # the package layer checks the packages with it
               prometheus prometheus-postgres-exporter  # the monitoring test: promtool, Prometheus, the exporter
               chromium chromium-driver)  # the browser layer drives jq-dashboard's pages in headless Chromium through WebDriver
case "$purpose" in
  run) DEB_PACKAGES=(postgresql-$PG_MAJOR postgresql-$PG_MAJOR-plproxy) ;;
  docs) DEB_PACKAGES=() ;;
  build) DEB_PACKAGES=("${BUILD_PACKAGES[@]}")
         [ "${PG:-15}" = 18 ] && DEB_PACKAGES+=("${PG18_BUILD_PACKAGES[@]}") ;;
  test) DEB_PACKAGES=("${BUILD_PACKAGES[@]}" "${PG18_BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}") ;;
  *) echo "usage: setup.sh run|build|test|docs" >&2; exit 2 ;;
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

# The toolchain of rust-toolchain.toml. rustup installs it on first use where it can download; on a
# machine that cannot, but whose default toolchain is that same release, the release's name is
# made to point at the default (a link in rustup's toolchain directory, which rustup reads as an
# installed toolchain). Anything else stops here, before a build fails in a less clear way.
check_rust() {
  local want have
  want=$(sed -n 's/^channel = "\(.*\)"$/\1/p' rust-toolchain.toml)
  if command -v rustup >/dev/null && ! rustup toolchain list | grep -q "^$want-"; then
    local default
    default=$(rustup default | cut -d' ' -f1)
    if [ "$(rustup run "$default" rustc --version | cut -d' ' -f2)" = "$want" ]; then
      log "naming the default toolchain ($default, rustc $want) $want, as rust-toolchain.toml pins it"
      ln -s "$(rustup run "$default" rustc --print sysroot)" \
        "${RUSTUP_HOME:-$HOME/.rustup}/toolchains/$want-$(rustup run "$default" rustc -vV | sed -n 's/^host: //p')"
    fi
  fi
  have=$(rustc --version | cut -d' ' -f2)
  if [ "$have" != "$want" ]; then
    log "rustc is $have; pg_jobqueue builds with $want (rust-toolchain.toml): install it with rustup"
    exit 1
  fi
}

install_cargo_pgrx() {
  if cargo pgrx --version 2>/dev/null | grep -q "$PGRX_VERSION"; then return; fi
  log "building cargo-pgrx $PGRX_VERSION (10-17 minutes, once per machine)"
  cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
}

# Where pgrx's build finds each server version's pg_config: ~/.pgrx/config.toml, the file `cargo
# pgrx init --pg15 PATH` writes. Building needs only this file, so `build` writes it itself and
# spares the demo building cargo-pgrx; `test` then runs `cargo pgrx init` (below), which finds it
# complete and leaves it.
write_pgrx_config() {
  local home=${PGRX_HOME:-$HOME/.pgrx}
  local config=$home/config.toml
  local want=("pg$PG_MAJOR = \"$PG_CONFIG\"")
  [ -f "$PG18/READY" ] && want+=("pg18 = \"$PG18/bin/pg_config\"")
  local line missing=0
  for line in "${want[@]}"; do grep -qxF "$line" "$config" 2>/dev/null || missing=1; done
  [ "$missing" = 0 ] && return
  log "writing $config for $(printf "%s " "${want[@]}")"
  mkdir -p "$home"
  printf '%s\n' '[configs]' "${want[@]}" > "$config"
}

# cargo pgrx init against 15, and 18 once it is built: pgrx keeps one list of versions, so each
# init names every version the machine has.
init_pgrx() {
  local config="${PGRX_HOME:-$HOME/.pgrx}/config.toml"
  local versions=(--pg$PG_MAJOR "$PG_CONFIG") missing=0
  [ -f "$PG18/READY" ] && versions+=(--pg18 "$PG18/bin/pg_config")
  grep -q "pg$PG_MAJOR = \"$PG_CONFIG\"" "$config" 2>/dev/null || missing=1
  if [ -f "$PG18/READY" ]; then grep -q "pg18 = \"$PG18/bin/pg_config\"" "$config" 2>/dev/null || missing=1; fi
  [ "$missing" = 0 ] && return
  log "cargo pgrx init with $(printf "%s " "${versions[@]}")"
  cargo pgrx init "${versions[@]}"
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
# they come from Debian's source package of the version, fetched and built once per machine into
# /var/cache/pg_jobqueue/pg<version>-regress, outside the repository so that `cargo clean` keeps
# them. Only those two directories are unpacked, and only the three files are compiled, with the
# server's own flags (pgxs): no configure.
PG_SOURCE_LIST=/etc/apt/sources.list.d/pg_jobqueue-src.sources

# Source packages, from the archive and keyring of /etc/apt/sources.list.d/debian.sources:
# bookworm's for PostgreSQL 15's regression suite, sid's for PostgreSQL 18 (no other suite here has
# it). Only deb-src entries: no binary package comes from sid.
source_list() {
  grep -q '^Suites: bookworm sid$' "$PG_SOURCE_LIST" 2>/dev/null && return
  printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm sid' 'Components: main' \
    'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | as_root tee "$PG_SOURCE_LIST" >/dev/null
  as_root apt-get update -qq
}

# Downloads a source package's files into a directory, once: fetch_source PACKAGE/SUITE DIR.
fetch_source() {
  local package=$1 download=$2
  as_root mkdir -p "$download"
  ls "$download/${package%%/*}"_*.orig.tar.* >/dev/null 2>&1 && return
  # As root apt warns that its sandbox user cannot write here; root downloading is what we want.
  # A list written by an interrupted setup may not have been read by apt yet: update once, retry.
  (cd "$download" && { as_root apt-get source --download-only -qq -o APT::Sandbox::User=root "$package" ||
    { as_root apt-get update -qq &&
      as_root apt-get source --download-only -qq -o APT::Sandbox::User=root "$package"; }; })
}

# fetch_regress_suite VERSION SOURCE_PACKAGE/SUITE
fetch_regress_suite() {
  local version=$1 package=$2
  local cache=/var/cache/pg_jobqueue/pg$version-regress
  [ -f "$cache/READY" ] && return
  log "fetching and building PostgreSQL $version's regression suite (once per machine)"
  source_list
  local download=$cache/download
  [ "$version" = 18 ] && download=$PG18_BUILD_CACHE/download   # the tarball the server was built from
  fetch_source "$package" "$download"
  local tarball top
  tarball=$(ls "$download"/postgresql-"$version"_*.orig.tar.bz2 | tail -n 1)
  top=$(basename "$tarball" .orig.tar.bz2 | sed "s/^postgresql-${version}_/postgresql-/")
  as_root rm -rf "$cache/tree" "$cache/lib"
  as_root mkdir -p "$cache/tree" "$cache/lib"
  as_root tar -xjf "$tarball" -C "$cache/tree" --strip-components=1 \
      "$top/src/test/regress" "$top/contrib/spi"
  local build
  build=$(mktemp -d)
  cp "$cache/tree/src/test/regress/regress.c" "$cache/tree/contrib/spi/refint.c" \
     "$cache/tree/contrib/spi/autoinc.c" "$build/"
  # REFINT_VERBOSE: refint's NOTICEs, which the triggers test expects (as contrib/spi/Makefile says).
  printf 'MODULES = regress refint autoinc\nPG_CPPFLAGS = -DREFINT_VERBOSE\nPG_CONFIG = %s\nPGXS := $(shell $(PG_CONFIG) --pgxs)\ninclude $(PGXS)\n' \
    "/usr/lib/postgresql/$version/bin/pg_config" > "$build/Makefile"
  # with_llvm=no: no JIT bitcode, which only the server's own inlining of its functions would use.
  make -s -C "$build" with_llvm=no >/dev/null
  as_root cp "$build/regress.so" "$build/refint.so" "$build/autoinc.so" "$cache/lib/"
  rm -rf "$build"
  # The servers of the suite run as `postgres`: they read the data files and load the modules.
  as_root chmod -R a+rX "$cache"
  basename "$tarball" | as_root tee "$cache/READY" >/dev/null
}

# PostgreSQL 18 from the upstream tarball of Debian's source package, into $PG18 (several minutes
# on two cores, once per machine): the server and its programs, the contrib modules, pg_regress
# (installed with pgxs) and the isolation tester, which Debian's packages put in pgxs too.
build_postgresql_18() {
  [ -f "$PG18/READY" ] && return
  log "building PostgreSQL 18 from Debian's source package into $PG18 (once per machine, several minutes)"
  source_list
  fetch_source postgresql-18/sid "$PG18_BUILD_CACHE/download"
  local tarball tree build_log
  tarball=$(ls "$PG18_BUILD_CACHE"/download/postgresql-18_*.orig.tar.* | tail -n 1)
  tree=$(mktemp -d)
  build_log=$tree/build.log
  tar -xf "$tarball" -C "$tree" --strip-components=1
  # As Debian configures its server, in what the tests see: ICU, readline, zlib. Its top-level
  # make generates the headers every directory includes only when it runs at MAKELEVEL 0; under
  # `make setup` or `make test` it would inherit this project's make level and skip them.
  if ! (cd "$tree" && unset MAKELEVEL MAKEFLAGS MFLAGS && ./configure --prefix="$PG18" --datadir=/usr/share/postgresql/18 \
          --with-icu --with-readline --with-zlib &&
        make -j"$(nproc)" world-bin && make -C src/test/isolation) >"$build_log" 2>&1; then
    tail -n 40 "$build_log" >&2
    log "building PostgreSQL 18 failed; the log above is the end of $build_log"
    exit 1
  fi
  (cd "$tree" && unset MAKELEVEL MAKEFLAGS MFLAGS && as_root make -s install-world-bin >/dev/null)
  as_root install -d "$PG18/lib/pgxs/src/test/isolation"
  as_root install -m 755 "$tree/src/test/isolation/isolationtester" \
    "$tree/src/test/isolation/pg_isolation_regress" "$PG18/lib/pgxs/src/test/isolation/"
  rm -rf "$tree"
  basename "$tarball" | as_root tee "$PG18/READY" >/dev/null
}

# mdBook builds the user guide (make docs). Pinned, so that a guide builds the same everywhere; from
# crates.io like the rest of the toolchain, once per machine (about 4 minutes on 2 cores).
MDBOOK_VERSION=0.4.52
install_mdbook() {
  if mdbook --version 2>/dev/null | grep -q "v$MDBOOK_VERSION\$"; then return; fi
  log "building mdbook $MDBOOK_VERSION (about 4 minutes, once per machine)"
  cargo install mdbook --version "$MDBOOK_VERSION" --locked
}

install_packages
[ "$purpose" = run ] && exit 0
check_rust
if [ "$purpose" = docs ]; then install_mdbook; exit 0; fi
# The tests run on both versions; building or running on 18 (PG=18) needs it too.
if [ "$purpose" = test ] || [ "${PG:-15}" = 18 ]; then build_postgresql_18; fi
[ "$purpose" = test ] && install_lint_tools
[ "$purpose" = test ] && install_mdbook
# bookworm's source of 15, not bookworm-security's: the server may be that suite's newer minor
# version, but its pool did not serve the source here. A suite a minor version off the server fails
# a few tests of its own on every server alike, which the comparison of the two runs does not count.
[ "$purpose" = test ] && fetch_regress_suite "$PG_MAJOR" "postgresql-$PG_MAJOR/bookworm"
[ "$purpose" = test ] && fetch_regress_suite 18 postgresql-18/sid
write_pgrx_config
# cargo-pgrx runs the unit layer (`cargo pgrx test`); building needs none of it (scripts/stage.sh).
if [ "$purpose" = test ]; then install_cargo_pgrx; init_pgrx; fi
exit 0
