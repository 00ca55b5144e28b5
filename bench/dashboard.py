#!/usr/bin/env python3
"""What jq-dashboard's pages cost on a large database: 1,000 queues holding 1,000,000 jobs.

One throwaway server (scripts/pg.sh), preloaded, filled with 1,000 queues: per queue 400 pending
and 50 scheduled jobs, 5 running, 5 dead, and 540 succeeded jobs in the history (written straight
into today's partition: completing half a million jobs one by one would take the bench's time, and
the pages read the history the same way whatever wrote it). jq-dashboard (the optimized build)
connects as a role with `manage` on every queue. The bench times GET / (the overview), a queue's
page and /dead, several times each, and prints the median of each; then it prints EXPLAIN of each
statement a page runs, with the parameters of the bench's own GETs, showing that none reads the
history but by a job's id.

    make bench-dashboard            # or: bench/dashboard.py --queues 1000 --jobs 1000000 --gets 9
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import psycopg

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONF = ["shared_preload_libraries = 'pg_jobqueue'", "shared_buffers = '512MB'", "max_wal_size = '4GB'"]

FILL = """
SELECT jq_prune();
SELECT count(*) FROM generate_series(1, %(queues)s) q,
       LATERAL jq_enqueue_batch('q' || q, array_fill('{"kind": "bench"}'::jsonb, ARRAY[%(pending)s]));
SELECT count(*) FROM generate_series(1, %(queues)s) q,
       LATERAL jq_enqueue_batch('q' || q, array_fill('{}'::jsonb, ARRAY[%(scheduled)s]),
                                run_at => now() + interval '1 day');
INSERT INTO jq_job_history (id, queue_id, payload, priority, available_at, attempt_count, max_attempts,
                            lease_token, created_at, finished_at, result)
SELECT nextval('jq_jobs_id_seq'), n.queue_id, '{"kind": "bench"}', 0, now() - interval '1 hour', 1, 8, 1,
       now() - interval '1 hour', now() - (i % 3000) * interval '1 second', '{"ok": true}'
FROM jq_queue_ids n, generate_series(1, %(succeeded)s) i;
DO $$
DECLARE q int; r record; k int := 0;
BEGIN
    FOR q IN 1 .. %(queues)s LOOP
        FOR r IN SELECT * FROM jq_claim('q' || q, 'bench-worker', interval '1 hour', 10) LOOP
            k := k + 1;
            IF k % 2 = 0 THEN
                PERFORM jq_fail(r.id, 'bench-worker', r.lease_token, 'E' || (q % 7), 'failed in the bench',
                                retryable => false);
            END IF;
        END LOOP;
    END LOOP;
END $$;
"""

# The statements of dashboard/sql a page runs, with the parameters of the GETs below; `{dead}` is
# a dead job's id, `{ids}` the ids /dead reads.
EXPLAINED = [
    ("overview", []),
    ("counters", []),
    ("backlog", []),
    ("queue_figures", ["q1"]),
    ("held_keys", ["q1"]),
    ("queue_jobs", ["q1", None, None, None, None, 51, 0]),
    ("queue_jobs", ["q1", "succeeded", None, None, None, 51, 0]),
    ("finished_ids", [["q1"], 5000]),
    ("finished_ids", [None, 5000]),
    ("finished_jobs", ["{ids}", ["dead", "cancelled"], None, None, None]),
    ("job", ["{dead}"]),
    ("job_events", ["{dead}"]),
    ("schedules", []),
]


# jq_list_jobs's own statements (sql/queries), which the plan of queue_jobs.sql shows only as a
# function scan: with the arguments the function passes them for the GETs of q1's page.
LISTED = [
    ("list_live", ["q1", None, None, None, None, 51, 0]),
    ("list_succeeded", ["q1", None, None, None, 51, 0]),
]


def statement(name, params, folder="dashboard/sql"):
    """A statement of `folder` with its parameters as psycopg's placeholders, its comments
    (which name the parameters too) left out."""
    text = "\n".join(line for line in (ROOT / f"{folder}/{name}.sql").read_text().splitlines()
                     if not line.lstrip().startswith("--"))
    for n in range(params, 0, -1):
        text = text.replace(f"${n}", f"%(p{n})s")
    return text


def named(params):
    """The parameters of `statement`, by name: a statement may use one more than once."""
    return {f"p{n}": value for n, value in enumerate(params, 1)}


def explain(c, name, text, params, filled):
    """Prints the plan of the statement `name`; returns how many sequential scans of a history
    partition that holds jobs (`filled`) it has."""
    plan = [r[0] for r in c.execute("EXPLAIN " + text, named(params)).fetchall()]
    reads = [line for line in plan if any(f"Seq Scan on {part} " in line + " " for part in filled)]
    verdict = "READS THE HISTORY" if reads else "no sequential scan of a history partition that holds jobs"
    print(f"\n-- {name}.sql: {verdict}")
    print("\n".join(plan))
    return len(reads)


def sh(*args):
    return subprocess.run(args, check=True, text=True, capture_output=True).stdout


def get(url):
    began = time.monotonic()
    with urllib.request.urlopen(url) as reply:
        body = reply.read()
    return time.monotonic() - began, body


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queues", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--gets", type=int, default=9)
    parser.add_argument("--port", type=int, default=int(os.environ.get("BENCH_PORT", 55493)))
    parser.add_argument("--binary", default=str(ROOT / "target/release/jq-dashboard"))
    args = parser.parse_args()
    per_queue = args.jobs // args.queues
    shape = {"queues": args.queues, "pending": per_queue * 40 // 100, "scheduled": per_queue * 5 // 100,
             "succeeded": per_queue - per_queue * 40 // 100 - per_queue * 5 // 100 - 10}
    pgdir = os.path.join(tempfile.gettempdir(), "pg_jobqueue-bench-dashboard")
    pg = str(ROOT / "scripts/pg.sh")
    dsn = f"host=127.0.0.1 port={args.port} user=postgres dbname=postgres"
    sh(pg, "stop", pgdir)
    sh(pg, "start", pgdir, str(args.port), *CONF)
    dashboard = None
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("CREATE EXTENSION pg_jobqueue")
            print(f"filling {args.queues:,} queues with {args.jobs:,} jobs ...", flush=True)
            began = time.monotonic()
            sql = FILL
            for key, value in shape.items():
                sql = sql.replace(f"%({key})s", str(value))
            c.execute(sql)
            c.execute("VACUUM ANALYZE")
            c.execute("CREATE ROLE ops LOGIN")
            c.execute("SELECT jq_grant('ops', '*', 'manage')")
            c.execute("SELECT jq_schedule('nightly', '0 3 * * *', 'q1', '{}')")
            counts = dict(c.execute("SELECT status::text, count(*) FROM jq_jobs GROUP BY 1").fetchall())
            print(f"  {time.monotonic() - began:.0f} s: {counts}", flush=True)
            dead = c.execute("SELECT id FROM jq_jobs WHERE status = 'dead' AND queue_name = 'q1' LIMIT 1").fetchone()[0]

        ops_dsn = dsn.replace("user=postgres", "user=ops")
        dashboard = subprocess.Popen([args.binary, "--listen", "127.0.0.1:0", "--dsn", ops_dsn],
                                     stdout=subprocess.PIPE, text=True)
        line = dashboard.stdout.readline().strip()
        base = line.removeprefix("jq-dashboard listening on ").split()[0]
        print(line, flush=True)
        get(f"{base}/")  # the first sample and connection
        results = {}
        for page in ["/", "/queues/q1", "/queues/q1?status=succeeded", "/dead", f"/jobs/{dead}"]:
            times, size = [], 0
            for _ in range(args.gets):
                took, body = get(base + page)
                times.append(took)
                size = len(body)
            results[page] = times
            print(f"GET {page:<28} median {statistics.median(times) * 1000:7.1f} ms  "
                  f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}, {args.gets} GETs, {size:,} bytes)",
                  flush=True)

        print("\nEXPLAIN of each statement, as the role ops (dashboard/sql):")
        with psycopg.connect(ops_dsn, autocommit=True) as c:
            c.execute((ROOT / "dashboard/sql/session.sql").read_text())
            ids = [r[0] for r in c.execute(statement("finished_ids", 2), named([None, 5000])).fetchall()]
            # The partitions that hold rows: the empty ones (tomorrow's, the default) are read by
            # a sequential scan of nothing, which is no read of the history.
            filled = {r[0] for r in c.execute(
                "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relname LIKE 'jq_job_history%' "
                "AND c.relkind = 'r' AND c.reltuples > 0").fetchall()}
            print(f"history partitions that hold jobs: {', '.join(sorted(filled))}")
            history_reads = 0
            for name, params in EXPLAINED:
                params = [ids if p == "{ids}" else dead if p == "{dead}" else p for p in params]
                history_reads += explain(c, name, statement(name, len(params)), params, filled)
        print("\nEXPLAIN of jq_list_jobs's statements, as the owner (sql/queries), as it plans them:")
        with psycopg.connect(dsn, autocommit=True) as c:
            for name, params in LISTED:
                history_reads += explain(c, name, statement(name, len(params), "sql/queries"), params, filled)
        print(f"\nsequential scans of a history partition that holds jobs, in all plans: {history_reads}")
        print(f"\noverview of {args.queues:,} queues and {args.jobs:,} jobs: "
              f"median {statistics.median(results['/']) * 1000:.0f} ms over {args.gets} GETs")
    finally:
        if dashboard:
            dashboard.terminate()
            dashboard.wait()
        subprocess.run([pg, "stop", pgdir], check=False)


if __name__ == "__main__":
    sys.exit(main())
