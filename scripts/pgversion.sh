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
