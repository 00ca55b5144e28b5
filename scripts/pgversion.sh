# Sourced by the scripts: the PostgreSQL major version they build, install and test against, and
# where its programs are. PG picks it (`make test PG=18`); 15 unless set. Both versions' programs
# live under /usr/lib/postgresql/<version>: 15 from Debian's packages, 18 built by scripts/setup.sh
# in the same layout.
PG=${PG:-15}
case "$PG" in
  15|18) ;;
  *) echo "PG=$PG: pg_jobqueue builds against PostgreSQL 15 or 18" >&2; exit 2 ;;
esac
export PG
PG_BIN=/usr/lib/postgresql/$PG/bin
PG_CONFIG=$PG_BIN/pg_config
PG_PGXS=/usr/lib/postgresql/$PG/lib/pgxs
# The version's own psql, pg_dump, pgbench first, for the scripts and the tests they start: once 18
# is installed, Debian's wrappers in /usr/bin pick the newest version's programs, and a pg_dump of
# 18 writes settings (transaction_timeout) that a pg_restore into 15 refuses.
export PATH="$PG_BIN:$PATH"
