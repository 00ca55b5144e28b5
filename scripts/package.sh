#!/usr/bin/env bash
# Builds the Debian packages of pg_jobqueue into target/debian (guide, "Install"):
#   postgresql-PG-pg-jobqueue   the extension, for the PostgreSQL version PG names (15 unless set;
#                               scripts/pgversion.sh): the library, the control file, the install
#                               script of every released version and every upgrade script, the
#                               router extension (which needs postgresql-PG-plproxy, suggested), and
#                               in its doc directory the README with the guide's chapters, and
#                               monitoring/ in examples
#   pg-jobqueue-worker          jq-worker and jq-dashboard, in /usr/bin, with their man pages
# versioned from Cargo.toml. Both are built with the optimized profile. dpkg installs each file
# beside the old one and renames it over, so installing on a running server is safe; the new
# library is used after a restart (or, without preload, by new sessions).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/pgversion.sh

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
out=target/debian
work=$out/build
rm -rf "$work"; mkdir -p "$work"

maintainer='pg_jobqueue maintainers <maintainers@pg-jobqueue.invalid>'
log() { printf '[package] %s\n' "$*" >&2; }

# The control file's fields that both packages share.
common_fields() {
  cat <<FIELDS
Version: $version
Architecture: $arch
Maintainer: $maintainer
Section: database
Priority: optional
FIELDS
}

# The files Debian policy asks of every package, in ROOT/usr/share/doc/PACKAGE: the copyright
# (machine-readable, its licence text taken from LICENSE) and, this being a native package, its
# changelog in Debian's format, pointing at CHANGELOG.md. The date is the last commit's, so that
# two builds of one commit are the same package.
policy_files() {
  local root=$1 package=$2 doc=$1/usr/share/doc/$2 date
  date=$(date -R -u -d "@$(git log -1 --format=%at 2>/dev/null || date +%s)")
  mkdir -p "$doc"
  {
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: pg_jobqueue"
    echo
    echo "Files: *"
    echo "Copyright: $(sed -n 's/^Copyright (c) //p' LICENSE)"
    echo "License: PostgreSQL"
    sed -n '/^Permission/,$p' LICENSE | sed 's/^$/./; s/^/ /'
  } > "$doc/copyright"
  {
    echo "pg-jobqueue ($version) unstable; urgency=medium"
    echo
    echo "  * pg_jobqueue $version: what changed is in CHANGELOG.md.gz beside this file."
    echo
    echo " -- $maintainer  $date"
  } | gzip -9n > "$doc/changelog.gz"
  chmod 644 "$doc/copyright" "$doc/changelog.gz"
}

# Installs the lintian overrides of PACKAGE (the test of the packages runs lintian and fails on
# any finding not overridden): those on standard input, and the one every Rust binary BINARY has.
lintian_overrides() {
  local root=$1 package=$2 binary=$3 file=$1/usr/share/lintian/overrides/$2
  mkdir -p "$(dirname "$file")"
  {
    cat
    echo "# Rust checks bounds itself and calls none of the C library's functions that"
    echo "# _FORTIFY_SOURCE replaces with checked ones."
    echo "$package: hardening-no-fortify-functions [$binary]"
  } > "$file"
  chmod 644 "$file"
}

# Strips FILE of its symbols and debug sections as Debian's dh_strip does.
strip_binary() {
  strip --remove-section=.comment --remove-section=.note --strip-unneeded "$1"
}

# Builds ROOT (a tree laid out as installed, with ROOT/DEBIAN/control) into a .deb.
build_deb() {
  local root=$1
  (cd "$root" && find . -type f ! -path './DEBIAN/*' -printf '%P\0' | sort -z | xargs -0 md5sum) > "$root/DEBIAN/md5sums"
  local installed_kb
  installed_kb=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
  echo "Installed-Size: $installed_kb" >> "$root/DEBIAN/control"
  dpkg-deb --root-owner-group -Zxz --build "$root" "$out/" >&2
}

log "building the extension (optimized)"
stage=$(scripts/stage.sh release)
extension=$work/postgresql-$PG-pg-jobqueue
mkdir -p "$extension/DEBIAN"
cp -a "$stage/." "$extension/"
find "$extension" -type d -exec chmod 755 {} +
find "$extension/usr/share" -type f -exec chmod 644 {} +
chmod 644 "$extension/usr/lib/postgresql/$PG/lib/pg_jobqueue.so"  # as Debian installs shared libraries
strip_binary "$extension/usr/lib/postgresql/$PG/lib/pg_jobqueue.so"
policy_files "$extension" "postgresql-$PG-pg-jobqueue"
lintian_overrides "$extension" "postgresql-$PG-pg-jobqueue" "usr/lib/postgresql/$PG/lib/pg_jobqueue.so" <<OVERRIDES
# PostgreSQL's own layout: every extension's library is in /usr/lib/postgresql/N/lib.
postgresql-$PG-pg-jobqueue: repeated-path-segment lib [usr/lib/postgresql/$PG/lib/]
OVERRIDES
install -m 644 README.md CHANGELOG.md "$extension/usr/share/doc/postgresql-$PG-pg-jobqueue/"
# The user guide's chapters beside the README, where its links into docs/src lead.
install -D -m 644 -t "$extension/usr/share/doc/postgresql-$PG-pg-jobqueue/docs/src" docs/src/*.md
# The alert rules on jq_metrics()'s series, and postgres_exporter's queries with the rules on its
# series (guide, "Operating").
install -D -m 644 -t "$extension/usr/share/doc/postgresql-$PG-pg-jobqueue/examples/monitoring" \
  monitoring/alerts.yml monitoring/postgres_exporter.yaml monitoring/postgres_exporter_alerts.yml
{
  echo "Package: postgresql-$PG-pg-jobqueue"
  common_fields
  echo "Depends: postgresql-$PG, libc6 (>= 2.36), libgcc-s1"
  echo "Suggests: postgresql-$PG-plproxy, postgresql-$PG-cron, pg-jobqueue-worker"
  echo "Description: reliable job queue inside PostgreSQL $PG"
  cat <<'DESCRIPTION'
 pg_jobqueue is a PostgreSQL extension that puts a job queue inside the
 database, as SQL functions: enqueue, claim with a lease and a fencing token,
 heartbeat, complete, fail with retries and backoff, dead jobs kept and
 re-drivable, schedules, results and flow control. Preloaded, it adds a
 background reaper of expired leases and wake-ups through shared memory.
 .
 This package also holds pg_jobqueue_router, which routes the same functions
 over several servers with PL/Proxy.
DESCRIPTION
} > "$extension/DEBIAN/control"
# Removing the library while a cluster still names it in shared_preload_libraries leaves a server
# that runs on (its processes keep the library they loaded) but does not start again: the next
# start ends with `FATAL: could not access file "pg_jobqueue"` (guide, "Uninstall"). The removal
# is not refused: a maintainer script that fails stops apt in the middle of its work (removing
# PostgreSQL itself, or a dist-upgrade), and a DBA who removes a package expects it removed, as
# Debian's other PostgreSQL extensions are. It warns instead, naming each cluster of this version
# that still preloads it and the file whose line does, so that the list is fixed before the next
# restart. The clusters are postgresql-common's (PG_CLUSTER_CONF_ROOT, /etc/postgresql unless
# set); in each, the line that wins is the last one of postgresql.conf, conf.d/*.conf and the data
# directory's postgresql.auto.conf (ALTER SYSTEM's), read in that order as PostgreSQL reads them.
# An upgrade replaces the library and warns of nothing.
cat > "$extension/DEBIAN/prerm" <<PRERM
#!/bin/sh
set -e
[ "\$1" = remove ] || exit 0
for conf in "\${PG_CLUSTER_CONF_ROOT:-/etc/postgresql}"/$PG/*/postgresql.conf; do
    [ -f "\$conf" ] || continue
    dir=\$(dirname "\$conf")
    cluster=\$(basename "\$dir")
    data=\$(sed -n "s/^[[:space:]]*data_directory[[:space:]]*=[[:space:]]*'\\(.*\\)'.*/\\1/p" "\$conf" | tail -n 1)
    last=""
    where=""
    for file in "\$conf" "\$dir"/conf.d/*.conf "\${data:-/var/lib/postgresql/$PG/\$cluster}/postgresql.auto.conf"; do
        [ -r "\$file" ] || continue
        line=\$(grep -E "^[[:space:]]*shared_preload_libraries([[:space:]]|=)" "\$file" | tail -n 1)
        if [ -n "\$line" ]; then
            last=\$line
            where=\$file
        fi
    done
    case "\$last" in
        *pg_jobqueue*)
            echo "postgresql-$PG-pg-jobqueue: warning: the cluster $PG/\$cluster still preloads pg_jobqueue" >&2
            echo "  (\$where: \$last)." >&2
            echo "  It runs on, but will not start again until pg_jobqueue is taken out of that list:" >&2
            echo "  ALTER SYSTEM SET shared_preload_libraries to the list without it, or edit that line." >&2
            ;;
    esac
done
exit 0
PRERM
chmod 755 "$extension/DEBIAN/prerm"
build_deb "$extension"

log "building jq-worker and jq-dashboard (optimized)"
cargo build --release -p jq-worker -p jq-dashboard >&2
worker=$work/pg-jobqueue-worker
install -D -m 755 "${CARGO_TARGET_DIR:-target}/release/jq-worker" "$worker/usr/bin/jq-worker"
install -D -m 755 "${CARGO_TARGET_DIR:-target}/release/jq-dashboard" "$worker/usr/bin/jq-dashboard"
strip_binary "$worker/usr/bin/jq-worker"
strip_binary "$worker/usr/bin/jq-dashboard"
install -D -m 644 worker/README.md "$worker/usr/share/doc/pg-jobqueue-worker/README.md"
policy_files "$worker" pg-jobqueue-worker
{
  echo "# Rust checks bounds itself and calls none of the C library's functions that"
  echo "# _FORTIFY_SOURCE replaces with checked ones."
  echo "pg-jobqueue-worker: hardening-no-fortify-functions [usr/bin/jq-dashboard]"
} | lintian_overrides "$worker" pg-jobqueue-worker usr/bin/jq-worker
install -d -m 755 "$worker/usr/share/man/man1"
for page in worker/man/jq-worker.1 dashboard/man/jq-dashboard.1; do
  gzip -9n < "$page" > "$worker/usr/share/man/man1/$(basename "$page").gz"
  chmod 644 "$worker/usr/share/man/man1/$(basename "$page").gz"
done
mkdir -p "$worker/DEBIAN"
{
  echo "Package: pg-jobqueue-worker"
  common_fields
  echo "Depends: libc6 (>= 2.36), libgcc-s1"
  echo "Suggests: postgresql-15-pg-jobqueue | postgresql-18-pg-jobqueue"
  cat <<'DESCRIPTION'
Description: runs a command for each job of a pg_jobqueue queue; web dashboard
 jq-worker claims jobs of one queue of pg_jobqueue, runs a command per job with
 the payload on stdin, heartbeats while it runs, and reports its exit status,
 its stdout (the result) and its progress lines. It follows a failover given a
 multi-host connection string.
 .
 jq-dashboard serves the queues, jobs, dead jobs and schedules of a database
 as web pages, showing and doing what its connecting role may, with charts of
 the last hour.
DESCRIPTION
} > "$worker/DEBIAN/control"
build_deb "$worker"

rm -rf "$work"
ls -1 "$out/postgresql-$PG-pg-jobqueue_${version}_$arch.deb" "$out/pg-jobqueue-worker_${version}_$arch.deb"
