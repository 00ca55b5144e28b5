#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and the demo, of the version PG names (15 unless set).
#   scripts/pg.sh start DIR PORT [extra postgresql.conf lines...]   initdb if needed, then start
#   scripts/pg.sh init DIR PORT [extra postgresql.conf lines...]    initdb only (PG_INITDB_OPTIONS: its options)
#   scripts/pg.sh stop DIR                                           fast shutdown, then remove DIR
#   scripts/pg.sh halt DIR                                           fast shutdown; keeps DIR
#   scripts/pg.sh crash DIR                                          immediate shutdown (as a crash); keeps DIR
# As root the server runs as the `postgres` user (PostgreSQL refuses to run as root).
set -euo pipefail
# shellcheck source=scripts/pgversion.sh
. "$(dirname "$0")/pgversion.sh"
BIN=$PG_BIN

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

init() {
  local dir=$1 port=$2; shift 2
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres: "$dir"
  chmod 700 "$dir"
  if [ ! -f "$dir/PG_VERSION" ]; then
    # shellcheck disable=SC2086
    as_pg env -u RUST_BACKTRACE "$BIN/initdb" -D "$dir" -U postgres -A trust --no-sync -E UTF8 \
      ${PG_INITDB_OPTIONS:-} >/dev/null
    {
      echo "port = $port"
      echo "listen_addresses = '127.0.0.1'"
      echo "unix_socket_directories = '$dir'"
      echo "max_connections = 100"
      echo "fsync = on"
      echo "synchronous_commit = on"
      for line in "$@"; do echo "$line"; done
    } >> "$dir/postgresql.conf"
  fi
}

start() {
  local dir=$1
  init "$@"
  # RUST_BACKTRACE would put Rust backtraces into error DETAIL lines.
  as_pg env -u RUST_BACKTRACE "$BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null
}

stop() {
  local dir=$1
  if [ -f "$dir/postmaster.pid" ]; then
    as_pg "$BIN/pg_ctl" -D "$dir" -m fast -w -t 60 stop >/dev/null || true
  fi
  rm -rf "$dir"
}

halt() {
  as_pg "$BIN/pg_ctl" -D "$1" -m fast -w -t 60 stop >/dev/null
}

crash() {
  as_pg "$BIN/pg_ctl" -D "$1" -m immediate -w -t 60 stop >/dev/null
}

cmd=${1:?usage: pg.sh start|init DIR PORT [conf...] | stop DIR | halt DIR | crash DIR}; shift
case "$cmd" in
  start) start "$@" ;;
  init) init "$@" ;;
  stop) stop "$@" ;;
  halt) halt "$@" ;;
  crash) crash "$@" ;;
  *) echo "usage: pg.sh start DIR PORT [conf...] | stop DIR | halt DIR | crash DIR" >&2; exit 2 ;;
esac
