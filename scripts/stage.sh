#!/usr/bin/env bash
# Builds pg_jobqueue into a staged tree, laid out as it installs into the PostgreSQL that PG names
# (15 unless set; scripts/pgversion.sh):
#   scripts/stage.sh debug|release    → target/stage-debug-pg15 or target/stage-release-pg15, printed last
# The tree holds the library, the control file, the install script of this version, the frozen
# install script of every released version, every upgrade script, and the router extension (guide,
# "Scaling out"). `scripts/install.sh` installs it; `make package` wraps it in a Debian package.
#
# It needs cargo and the server's headers, not cargo-pgrx: the library is built with plain cargo
# (pgrx finds pg_config in ~/.pgrx/config.toml, which scripts/setup.sh writes), and the install
# script is read out of the library by tools/schema (jq-schema), as `cargo pgrx package` would.
set -euo pipefail
cd "$(dirname "$0")/.."

profile=${1:?usage: stage.sh debug|release}
. scripts/pgversion.sh
stage=target/stage-$profile-pg$PG
target_dir=${CARGO_TARGET_DIR:-target}
case "$profile" in
  debug) flags=(); out=$target_dir/debug ;;
  release) flags=(--release); out=$target_dir/release ;;
  *) echo "usage: stage.sh debug|release" >&2; exit 2 ;;
esac
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)

# pgrx keeps every SQL object of the extension in the library's .pgrxsc section; the linker's
# --gc-sections would drop it, as nothing refers to it (the same flag cargo-pgrx builds with).
cargo --config 'target.'"'"'cfg(all(target_family = "unix", not(target_os = "macos")))'"'"'.rustflags = ["-C", "link-arg=-Wl,--no-gc-sections"]' \
  build --lib -p pg_jobqueue --no-default-features --features "pg$PG" "${flags[@]}" >&2
cargo build -q -p jq-schema >&2

rm -rf "$stage"
libdir=$stage$("$PG_CONFIG" --pkglibdir)
extension_dir=$stage$("$PG_CONFIG" --sharedir)/extension
install -d "$libdir" "$extension_dir"
install -m 755 "$out/libpg_jobqueue.so" "$libdir/pg_jobqueue.so"
sed "s/@CARGO_VERSION@/$version/g" pg_jobqueue.control > "$extension_dir/pg_jobqueue.control"
"$target_dir/debug/jq-schema" "$out/libpg_jobqueue.so" pg_jobqueue.control "$version" \
  > "$extension_dir/pg_jobqueue--$version.sql"
# A released version's install script is what its users have installed (sql/released/): a build
# of that version must make the very same one, or it is another version and needs its own number
# and upgrade script (DEVELOPMENT.md, "Releasing").
frozen=sql/released/pg_jobqueue--$version.sql
if [ -f "$frozen" ] && ! cmp -s "$frozen" "$extension_dir/pg_jobqueue--$version.sql"; then
  echo "stage.sh: $version is released, and this build's install script differs from $frozen:" >&2
  diff -u "$frozen" "$extension_dir/pg_jobqueue--$version.sql" | head -n 20 >&2 || true
  echo "stage.sh: give the build a new version in Cargo.toml and an upgrade script from $version" >&2
  exit 1
fi
install -m 644 sql/pg_jobqueue--*--*.sql sql/released/*.sql sql/router/pg_jobqueue_router.control \
  sql/router/pg_jobqueue_router--*.sql "$extension_dir/"
echo "$stage"
