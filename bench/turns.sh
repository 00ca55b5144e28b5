# What bench/dag_cost.sh and bench/key_cost.sh share, sourced by each from the repository's root:
# a throwaway server with make bench's settings (synchronous_commit off), the extension and the
# procedure of bench/systems/jobqueue/turns.sql; then, per round, a drain of the script's queue
# against `plainq`, job by job in turn, and at the end the median ratio of their times.
# The script sets DIR and PORT first; LABEL names its side in what is printed.
. scripts/pgversion.sh   # the server version's psql first
unset RUST_BACKTRACE
export PGHOST=127.0.0.1 PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
trap 'scripts/pg.sh stop "$DIR"' EXIT

scripts/pg.sh stop "$DIR"
scripts/pg.sh start "$DIR" "$PORT" "shared_buffers = 1GB" "max_wal_size = 8GB" "checkpoint_timeout = 30min" \
  "jit = off" "shared_preload_libraries = 'pg_jobqueue'" "synchronous_commit = off" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -c "CREATE EXTENSION pg_jobqueue"
psql -X -q -v ON_ERROR_STOP=1 -f bench/systems/jobqueue/turns.sql

# turns_round ROUND QUEUE: drains QUEUE against `plainq` (both filled by the script) and prints the
# round's times per job and their ratio.
turns_round() {
  psql -X -q -v ON_ERROR_STOP=1 -c "CALL bench_drain($1, '$2')"
  psql -X -At -F ' ' -c "SELECT round, jobs, round(side_us::numeric, 1), round(plain_us::numeric, 1),
                                round((plain_us / side_us)::numeric, 3) FROM bench_turns WHERE round = $1" |
    awk -v side="$LABEL" '{ printf "round %d  %d jobs each  %s %7.1f us/job  plain %7.1f us/job  " \
                                   "plain/%s %s\n", $1, $2, side, $3, $4, side, $5 }'
}

# turns_median: the median over the rounds of plain time over the side's.
turns_median() {
  psql -X -At -c "SELECT 'median of ' || count(*) || ' rounds: plain/$LABEL ' ||
                         round(percentile_disc(0.5) WITHIN GROUP (ORDER BY plain_us / side_us)::numeric, 3)
                  FROM bench_turns"
}
