#!/usr/bin/env bash
# make release VERSION=X.Y.Z: releases the version Cargo.toml holds (DEVELOPMENT.md, "Releasing").
#   1. checks: VERSION is Cargo.toml's, not released before, CHANGELOG.md's first entry is
#      "## VERSION (in development)", the working tree is clean;
#   2. builds the install script (for 15, and for 18 where it is built: they must be the same) and
#      freezes it as sql/released/pg_jobqueue--VERSION.sql;
#   3. dates the CHANGELOG entry, commits both as "Release VERSION" and tags it vVERSION;
#   4. builds the packages of the release commit (scripts/package.sh), into target/debian;
#   5. records that commit in the CHANGELOG entry ("Released from commit ..."), in a commit of its
#      own (the release commit cannot name itself).
# It pushes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

release=${1:?usage: release.sh VERSION}
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
frozen=sql/released/pg_jobqueue--$release.sql
say() { printf '[release] %s\n' "$*" >&2; }
fail() { say "$*"; exit 1; }

[ "$release" = "$version" ] ||
  fail "Cargo.toml's version is $version: raise it to $release first, with its upgrade script"
[ -f "$frozen" ] && fail "$release is released already ($frozen)"
grep -qx "## $release (in development)" CHANGELOG.md ||
  fail "CHANGELOG.md has no entry '## $release (in development)' to release"
[ "$(sed -n 's/^## //p' CHANGELOG.md | head -n 1)" = "$release (in development)" ] ||
  fail "CHANGELOG.md's first entry is not $release"
[ -z "$(git status --porcelain)" ] || fail "the working tree has changes: commit them first"

say "building the install script of $release"
stage=$(PG=15 scripts/stage.sh debug)
script=$stage/usr/share/postgresql/15/extension/pg_jobqueue--$release.sql
if [ -f /usr/lib/postgresql/18/READY ]; then
  stage18=$(PG=18 scripts/stage.sh debug)
  cmp -s "$script" "$stage18/usr/share/postgresql/18/extension/pg_jobqueue--$release.sql" ||
    fail "the install scripts built for 15 and 18 differ; one frozen script serves both"
fi
install -m 644 "$script" "$frozen"

today=$(date -u +%F)
sed -i "s/^## $release (in development)\$/## $release ($today)/" CHANGELOG.md
git add "$frozen" CHANGELOG.md
git commit -q -m "Release $release

Freezes its install script as $frozen, which no later commit edits: a build of
$release must make the very same one (scripts/stage.sh), and every later version upgrades
from it."
commit=$(git rev-parse --short=12 HEAD)
git tag -a "v$release" -m "pg_jobqueue $release" HEAD
say "released $release as commit $commit (tag v$release)"

say "building the packages of the release commit"
scripts/package.sh

# The entry's first line under its heading.
awk -v heading="## $release ($today)" -v line="Released from commit $commit (tag v$release), which froze its install script (\`$frozen\`)." '
  { print } $0 == heading { print ""; print line }' CHANGELOG.md > CHANGELOG.md.new
mv CHANGELOG.md.new CHANGELOG.md
git commit -q -m "CHANGELOG: $release was released from commit $commit" -- CHANGELOG.md
say "done: the packages of $release are in target/debian; push the commits and the tag v$release"
