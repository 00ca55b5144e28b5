#!/usr/bin/env python3
"""Side-by-side queue benchmark: pg_jobqueue, the classic SKIP LOCKED queue ("baseline") and pgmq.

One throwaway PostgreSQL cluster (15, or the version PG names: `make bench PG=18`), one database per system, the same pgbench client for all of them.
Each system's SQL lives in bench/systems/<system>/; see bench/README.md for the method.

    bench/run.py                 the full run: 3 runs of 10 s per workload, median
    bench/run.py --quick         one short run
"""

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The server version (scripts/pgversion.sh's PG): its psql, pgbench and pg_config come first.
PG = os.environ.get("PG", "15")
os.environ["PATH"] = f"/usr/lib/postgresql/{PG}/bin:" + os.environ["PATH"]
SYSTEMS_DIR = ROOT / "bench" / "systems"
SYSTEMS = ["jobqueue", "baseline", "pgmq"]
# pg_jobqueue again with one setting changed, in a database of its own, for the workloads where it
# matters: the same run then measures what the setting saves.
VARIANTS = {
    "jq_no_front": (["pg_jobqueue.claim_front = off"], ["w3", "w5"]),
    "jq_sync_claims": (["pg_jobqueue.async_claims = off"], ["w3", "w4_10"]),
    # W9: W3 on a queue whose history holds HISTORY_ROWS succeeded jobs, kept across runs.
    "jq_history": ([], ["w3"]),
    # W11: W3 on a queue whose jobs spread over 1,000 concurrency keys, at most one running per key
    # (bench/systems/jobqueue/keys.sql, fill_keyed.sql).
    "jq_keys": ([], ["w3"]),
    # W3 on a queue that keeps no succeeded job (bench/systems/jobqueue/keep_nothing.sql).
    "jq_keep_nothing": ([], ["w3"]),
    # W3 on a backlog older than the starvation limit (bench/systems/jobqueue/fill_aged.sql).
    "jq_aged": ([], ["w3"]),
    # W13: W3 on a DAG (bench/systems/jobqueue/fill_dag.sql): units of one job, 100 that depend on
    # it and one that depends on those 100, DAG_JOBS jobs in all, run to the end (dag_workload).
    "jq_dag": ([], ["w13"]),
}
DAG_JOBS = 100_000
HISTORY_ROWS = 10_000_000
CLIENTS = 8
# A fixed configuration, the same for every system; synchronous_commit is set per pass.
SERVER_CONF = [
    "shared_buffers = 1GB",
    "max_wal_size = 8GB",
    "checkpoint_timeout = 30min",
    "jit = off",
    # As users who want wake-ups run it: waiting claims are woken through shared memory (W8).
    "shared_preload_libraries = 'pg_jobqueue'",
    # But no background worker in the measured databases (it would serve every one): expired
    # leases are recovered by the claims themselves, and W7's passes are all jq_reap()'s own.
    "pg_jobqueue.reaper_databases = ''",
]
# What --server-defaults leaves out of SERVER_CONF.
TUNING = {"shared_buffers", "max_wal_size", "checkpoint_timeout", "jit"}
# Jobs a system is expected to move per second in each workload: sizes the prefill so no run drains
# its queue. A run that drains anyway is repeated with a larger queue.
EXPECTED_RATE = {"w3": 12000, "w4_10": 50000, "w4_100": 90000, "w5": 12000}


def sh(*args, **kw):
    return subprocess.run(args, check=True, text=True, capture_output=True, **kw).stdout


class Cluster:
    def __init__(self, port, directory):
        self.port = port
        self.dir = directory
        os.environ.update(PGHOST="127.0.0.1", PGPORT=str(port), PGUSER="postgres")
        os.environ.pop("RUST_BACKTRACE", None)

    def start(self):
        sh(str(ROOT / "scripts/pg.sh"), "stop", self.dir)
        sh(str(ROOT / "scripts/pg.sh"), "start", self.dir, str(self.port), *SERVER_CONF)

    def stop(self):
        subprocess.run([str(ROOT / "scripts/pg.sh"), "stop", self.dir], check=False)

    def psql(self, db, sql=None, file=None, variables=None):
        args = ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", db]
        for name, value in (variables or {}).items():
            args += ["-v", f"{name}={value}"]
        args += ["-f", str(file)] if file else ["-c", sql]
        return sh(*args).strip()

    def set_synchronous_commit(self, value):
        self.psql("postgres", f"ALTER SYSTEM SET synchronous_commit = {value}")
        self.psql("postgres", "SELECT pg_reload_conf()")


class System:
    def __init__(self, cluster, name, settings=(), workloads=()):
        self.cluster = cluster
        self.name = name
        self.dir = SYSTEMS_DIR / ("jobqueue" if name.startswith("jq_") else name)
        self.settings = settings
        # Empty: every workload.
        self.workloads = workloads

    def sql(self, file, **variables):
        return self.cluster.psql(self.name, file=self.dir / f"{file}.sql", variables=variables)

    def install(self, pgmq_sql):
        self.cluster.psql("postgres", f"CREATE DATABASE {self.name}")
        for setting in self.settings:
            name, value = (part.strip() for part in setting.split("="))
            self.cluster.psql("postgres", f"ALTER DATABASE {self.name} SET {name} = {value}")
        if self.name == "pgmq":
            self.cluster.psql(self.name, file=pgmq_sql)
        self.sql("setup")
        if self.name == "jq_keys":
            self.sql("keys")
        if self.name == "jq_keep_nothing":
            self.sql("keep_nothing")
        if self.name == "jq_history":
            print(f"  jq_history: {HISTORY_ROWS} succeeded jobs into the history", flush=True)
            self.cluster.psql(self.name, "SELECT jq_prune()")
            self.sql("history", rows=HISTORY_ROWS, age="1 minute")

    def prepare(self, fill):
        """An empty queue, refilled, vacuumed and checkpointed: every run starts from the same state
        (W9's history stays)."""
        self.sql("reset_live" if self.name == "jq_history" else "reset")
        if fill:
            self.sql({"jq_keys": "fill_keyed", "jq_aged": "fill_aged", "jq_dag": "fill_dag"}.get(self.name, "fill"),
                     fill=fill)
        self.vacuum()
        self.cluster.psql(self.name, "CHECKPOINT")

    def vacuum(self):
        for table in self.tables():
            self.cluster.psql(self.name, f"VACUUM ANALYZE {table}")

    def tables(self):
        return self.sql("tables").split()

    def pending(self):
        return int(self.sql("pending"))

    def footprint(self):
        tables = ",".join(f"'{t}'::regclass" for t in self.tables())
        row = self.cluster.psql(self.name, f"""
            SELECT sum(pg_table_size(relid)), sum(pg_indexes_size(relid)), sum(n_dead_tup)
            FROM pg_stat_user_tables WHERE relid IN ({tables})""")
        table, index, dead = (int(v) for v in row.split("|"))
        return {"table_bytes": table, "index_bytes": index, "dead_tuples": dead}


def pgbench(system, script, clients, defines, seconds=None, transactions=None):
    """Runs one pgbench script; returns transactions per second and per-transaction latencies (ms)."""
    with tempfile.TemporaryDirectory() as logs:
        # The database is the last argument: pgbench's -d is --debug, whose output costs the client.
        args = ["pgbench", "-n", "-M", "prepared", "-c", str(clients), "-j", str(min(clients, 2)),
                "-f", str(system.dir / f"{script}.sql"), "--log", f"--log-prefix={logs}/tx"]
        args += ["-T", str(seconds)] if seconds else ["-t", str(transactions)]
        for name, value in defines.items():
            args += ["-D", f"{name}={value}"]
        args.append(system.name)
        out = subprocess.run(args, text=True, capture_output=True)
        if out.returncode != 0 or "aborted" in out.stdout and not re.search(r"aborted: 0\b", out.stdout):
            sys.exit(f"pgbench failed for {system.name}/{script}:\n{out.stdout}\n{out.stderr}")
        tps = float(re.search(r"^tps = ([\d.]+)", out.stdout, re.M).group(1))
        latencies = []
        for log in Path(logs).iterdir():
            for line in log.read_text().splitlines():
                latencies.append(int(line.split()[2]) / 1000.0)
    return tps, latencies


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] if ordered else 0.0


class SnapshotHolder:
    """A REPEATABLE READ transaction in the system's own database that keeps its snapshot open (W5).
    It must be the same database: PostgreSQL only holds back cleanup for tables of the database
    whose sessions hold the old snapshot."""

    def __init__(self, cluster, db):
        self.cluster, self.db = cluster, db

    def __enter__(self):
        self.proc = subprocess.Popen(["psql", "-X", "-q", "-d", self.db], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, text=True)
        self.proc.stdin.write("BEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT count(*) FROM pg_class;\n")
        self.proc.stdin.flush()
        for _ in range(100):
            held = self.cluster.psql(self.db, """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND state = 'idle in transaction'
                  AND backend_xmin IS NOT NULL""")
            if held == "1":
                return self
            time.sleep(0.05)
        sys.exit("the REPEATABLE READ transaction did not start")

    def __exit__(self, *exc):
        self.proc.stdin.write("COMMIT;\n")
        self.proc.stdin.close()
        self.proc.wait()


def throughput_run(system, workload, script, jobs_per_tx, seconds, defines, fill, hold_snapshot=False):
    """One timed run from a prefilled (or empty) queue; repeated with more jobs if it drained."""
    while True:
        system.prepare(fill)
        wal_before = system.cluster.psql(system.name, "SELECT pg_current_wal_insert_lsn()")
        cpu_before = cpu_times()
        if hold_snapshot:
            with SnapshotHolder(system.cluster, system.name):
                tps, latencies = pgbench(system, script, CLIENTS, defines, seconds=seconds)
        else:
            tps, latencies = pgbench(system, script, CLIENTS, defines, seconds=seconds)
        steal = steal_pct(cpu_before, cpu_times())
        wal = int(system.cluster.psql(system.name, f"SELECT pg_current_wal_insert_lsn() - '{wal_before}'::pg_lsn"))
        if not fill or system.pending() > 0:
            break
        print(f"    {system.name} {workload}: the queue drained; again with {fill * 3} jobs", flush=True)
        fill *= 3
    # WAL of the whole server over the run, per job moved: the other databases are idle meanwhile.
    result = {"jobs_per_s": tps * jobs_per_tx, "p50_ms": percentile(latencies, 0.50),
              "p99_ms": percentile(latencies, 0.99), "wal_bytes_per_job": wal / max(1, len(latencies) * jobs_per_tx),
              "steal_pct": steal}
    result.update(system.footprint())
    return result


def cpu_times():
    """The machine's CPU time so far, from /proc/stat's first line: (all, steal), in ticks."""
    fields = [int(f) for f in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    # user nice system idle iowait irq softirq steal (guest time is counted in user already).
    return sum(fields[:8]), fields[7]


def steal_pct(before, after):
    """The share of the machine's CPU time the hypervisor took from it between two cpu_times()."""
    total, steal = after[0] - before[0], after[1] - before[1]
    return 100.0 * steal / total if total else 0.0


def machine():
    """What ran the benchmark: a ratio is of one machine, at one steal (printed with each cell)."""
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "unknown CPU")
    return f"{model}, {os.cpu_count()} cores"


def median_of(runs):
    keys = runs[0].keys()
    return {k: statistics.median(r[k] for r in runs) for k in keys}


def throughput_workloads(systems, seconds, runs, wanted):
    """W1-W5: every system, same script shape, 8 clients; runs alternate between systems."""
    specs = [
        ("w1", "w1_enqueue", 1, {}, 0, False),
        ("w2", "w2_enqueue_batch", 100, {"batch": 100}, 0, False),
        ("w3", "w3_claim_complete", 1, {}, None, False),
        ("w4_10", "w4_claim_complete_batch", 10, {"batch": 10}, None, False),
        ("w4_100", "w4_claim_complete_batch", 100, {"batch": 100}, None, False),
        ("w5", "w3_claim_complete", 1, {}, None, True),
    ]
    results = {}
    for workload, script, jobs_per_tx, defines, fill, hold in specs:
        if wanted and workload not in wanted:
            continue
        taking_part = [s for s in systems if not s.workloads or workload in s.workloads]
        per_system = {s.name: [] for s in taking_part}
        for run in range(runs):
            for system in taking_part:
                size = fill if fill is not None else max(20000, EXPECTED_RATE[workload] * seconds * 3 // 2)
                r = throughput_run(system, workload, script, jobs_per_tx, seconds, defines, size, hold)
                per_system[system.name].append(r)
                print(f"  {workload:7} run {run + 1}  {system.name:14} {r['jobs_per_s']:10.0f} jobs/s"
                      f"  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms  steal {r['steal_pct']:4.1f}%", flush=True)
        results[workload] = {name: median_of(rs) for name, rs in per_system.items()}
    return results


def process_stat(pid):
    """(parent pid, CPU ticks of the process itself, CPU ticks of its children it has waited for)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the command's name: state ppid ... utime (14th field) stime cutime cstime.
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def server_processes(postmaster):
    """The postmaster's live children, with their own CPU ticks."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid, own, _ = process_stat(entry.name)
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue
            if ppid == postmaster:
                children[int(entry.name)] = own
    return children


def server_cpu_ticks(postmaster):
    """Every CPU tick the server has spent: the postmaster's own, those of the children it has waited
    for (each backend that exited), and those of its live children (the checkpointer, the WAL
    writer, the autovacuum launcher, pg_jobqueue's workers, the backends still connected)."""
    _, own, waited = process_stat(postmaster)
    return own + waited + sum(server_processes(postmaster).values())


def cpu_per_job_workload(systems, jobs_per_client, runs):
    """W3 over a fixed number of jobs (pgbench -t, not -T), CPU time per job: of the whole server
    (server_cpu_ticks, every process of it over the run, backends counted once they have exited)
    and of pgbench, the client, apart. A cost per job, which a faster or slower machine scales for
    every system alike, where jobs per second also carry the machine's waits."""
    tick = os.sysconf("SC_CLK_TCK")
    results = {}
    for run in range(runs):
        for system in systems:
            if system.workloads and "w3" not in system.workloads:
                continue
            postmaster = int(Path(system.cluster.dir, "postmaster.pid").read_text().split()[0])
            system.prepare(CLIENTS * jobs_per_client * 3 // 2)
            background = set(server_processes(postmaster))
            before, client_before = server_cpu_ticks(postmaster), resource.getrusage(resource.RUSAGE_CHILDREN)
            pgbench(system, "w3_claim_complete", CLIENTS, {}, transactions=jobs_per_client)
            client_after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # Until the postmaster has waited for every backend pgbench had: their time is then its.
            while set(server_processes(postmaster)) - background:
                time.sleep(0.05)
            after = server_cpu_ticks(postmaster)
            jobs = CLIENTS * jobs_per_client
            client = (client_after.ru_utime + client_after.ru_stime) - (client_before.ru_utime + client_before.ru_stime)
            r = {"server_us_per_job": (after - before) / tick / jobs * 1e6, "client_us_per_job": client / jobs * 1e6}
            results.setdefault(system.name, []).append(r)
            print(f"  cpu     run {run + 1}  {system.name:14} server {r['server_us_per_job']:7.1f} us/job"
                  f"  client {r['client_us_per_job']:6.1f} us/job  ({jobs} jobs)", flush=True)
    return {name: median_of(rs) for name, rs in results.items()}


def dag_workload(systems, runs):
    """W13: a DAG of DAG_JOBS jobs (jq_dag) against as many jobs without dependencies (jobqueue),
    each run to its end by 8 clients of W3; jobs/s from the start to the last completion.

    Run to the end, not for a fixed time: the DAG's first jobs each release 100 others, and claims
    take them all before any of those (they became claimable later), so a run of a few seconds
    would pay for releasing most of the DAG and run a fraction of it."""
    taking_part = [s for s in systems if s.name in ("jobqueue", "jq_dag")]
    if len(taking_part) < 2:
        return {}
    per_system = {s.name: [] for s in taking_part}
    for run in range(runs):
        for system in taking_part:
            system.prepare(DAG_JOBS)
            jobs = int(system.cluster.psql(system.name, "SELECT count(*) FROM jq_live_jobs"))
            wal_before = system.cluster.psql(system.name, "SELECT pg_current_wal_insert_lsn()")
            start = system.cluster.psql(system.name, "SELECT clock_timestamp()")
            latencies = []
            # A transaction that finds nothing to claim (while a merge step waits for the last of its
            # siblings, and at the end) claims again; rounds until every job has run.
            while system.pending() > 0:
                _, more = pgbench(system, "w3_claim_complete", CLIENTS, {},
                                  transactions=max(100, system.pending() * 11 // 10 // CLIENTS))
                latencies += more
            done, seconds = (float(v) for v in system.cluster.psql(system.name, f"""
                SELECT count(*), extract(epoch FROM max(finished_at) - '{start}'::timestamptz)
                FROM jq_job_history""").split("|"))
            wal = int(system.cluster.psql(system.name, f"SELECT pg_current_wal_insert_lsn() - '{wal_before}'::pg_lsn"))
            r = {"jobs_per_s": done / seconds, "jobs": done, "seconds": seconds, "p50_ms": percentile(latencies, 0.50),
                 "p99_ms": percentile(latencies, 0.99), "wal_bytes_per_job": wal / max(1, done)}
            r.update(system.footprint())
            per_system[system.name].append(r)
            print(f"  w13     run {run + 1}  {system.name:14} {r['jobs_per_s']:10.0f} jobs/s  ({done:.0f} jobs in "
                  f"{seconds:.2f} s, to the last completion)", flush=True)
    return {name: median_of(rs) for name, rs in per_system.items()}


def claim_latency_workload(systems, runs, backlog, claims):
    """W6: claim latency, one client, with a small queue and then with a large backlog."""
    results = {}
    for system in systems:
        entry = {}
        for label, size in (("small", 10000), ("backlog", backlog)):
            system.prepare(size)
            p50s, p99s = [], []
            for _ in range(runs):
                system.vacuum()
                _, latencies = pgbench(system, "w6_claim", 1, {}, transactions=claims)
                p50s.append(percentile(latencies, 0.50))
                p99s.append(percentile(latencies, 0.99))
            entry[label] = {"jobs": size, "p50_ms": statistics.median(p50s), "p99_ms": statistics.median(p99s)}
        entry["ratio_p50"] = entry["backlog"]["p50_ms"] / entry["small"]["p50_ms"]
        results[system.name] = entry
        print(f"  w6      {system.name:9} p50 small {entry['small']['p50_ms']:.3f} ms, "
              f"backlog of {backlog} {entry['backlog']['p50_ms']:.3f} ms ({entry['ratio_p50']:.2f}x)", flush=True)
    return results


def reap_workload(system, leases):
    """W7: jq_reap passes (default max_jobs) until leases expired all at once are all pending again."""
    system.prepare(leases)
    # Inline recovery off while claiming: the first leases would expire before the last are taken.
    claimed = system.cluster.psql(system.name, f"""
        SET pg_jobqueue.inline_reap_max = 0;
        SELECT count(*) FROM generate_series(1, {leases // 1000}) AS pass,
             LATERAL jq_claim('bench', 'reaper-' || pass, '1 second', 1000)""")
    time.sleep(1.5)
    system.vacuum()
    passes, reaped, started = 0, 0, time.monotonic()
    while True:
        n = int(system.cluster.psql(system.name, "SELECT jq_reap()"))
        passes += 1
        reaped += n
        if n == 0:
            break
    seconds = time.monotonic() - started
    print(f"  w7      {system.name:9} {reaped} of {claimed} expired leases reaped in {seconds:.2f} s, "
          f"{passes} passes (the last one finds none)", flush=True)
    return {"leases": int(claimed), "reaped": reaped, "seconds": seconds, "passes": passes}


def retention_workload(system, jobs):
    """W10: one jq_prune() removes an expired day of `jobs` succeeded jobs; its time, and the dead
    tuples and deleted rows it leaves in the history's partitions."""
    system.prepare(0)
    system.cluster.psql(system.name, "SELECT jq_prune()")
    system.sql("history_day", days_ago=10)
    system.sql("history", rows=jobs, age="10 days")
    system.vacuum()
    system.cluster.psql(system.name, "CHECKPOINT")
    started = time.monotonic()
    pruned = int(system.cluster.psql(system.name, "SELECT jq_prune()"))
    seconds = time.monotonic() - started
    time.sleep(1)  # the pruning session's statistics reach the views when it exits
    dead, deleted = (int(v) for v in system.cluster.psql(system.name, """
        SELECT coalesce(sum(n_dead_tup), 0), coalesce(sum(n_tup_del), 0) FROM pg_stat_user_tables
        WHERE relname LIKE 'jq_job_history%'""").split("|"))
    print(f"  w10     {system.name:9} {pruned} of {jobs} jobs pruned in {seconds:.3f} s, "
          f"{dead} dead tuples and {deleted} deleted rows left in the history", flush=True)
    return {"jobs": jobs, "pruned": pruned, "seconds": seconds, "dead_tuples": dead, "deleted_rows": deleted}


def notify_cost_workload(system, seconds, runs):
    """W1 on pg_jobqueue with the queue's NOTIFY off, at its default (NULL) with nobody listening
    and with one session listening, and on (true) for every enqueue, runs alternating: what the
    notification costs enqueue throughput. NOTIFY serialises the commits of notifying transactions;
    at the default, a preloaded library notifies only while some session listens on the queue's
    channel, and one that is not preloaded never."""
    settings = {"off": "false", "on": "NULL", "listened": "NULL", "always": "true"}
    figures = {variant: [] for variant in settings}
    for run in range(runs):
        for variant in figures:
            system.cluster.psql(system.name, f"""
                INSERT INTO jq_queues (queue_name, notify) VALUES ('bench', {settings[variant]})
                ON CONFLICT (queue_name) DO UPDATE SET notify = EXCLUDED.notify""")
            listener = None
            if variant == "listened":
                # LISTEN commits on its own; the session then stays connected for the run.
                listener = subprocess.Popen(["psql", "-X", "-q", "-d", system.name, "-c", 'LISTEN "jq_bench"',
                                             "-c", "SELECT pg_sleep(3600)"], stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL,
                                            env={**os.environ, "PGAPPNAME": "jq-bench-listener"})
                time.sleep(1)
            try:
                r = throughput_run(system, "w1", "w1_enqueue", 1, seconds, {}, 0)
            finally:
                if listener:
                    # End the server session too: a backend asleep in pg_sleep does not notice its
                    # client leaving, and would go on listening (and being counted) for the hour.
                    system.cluster.psql("postgres", """
                        SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                        WHERE application_name = 'jq-bench-listener'""")
                    listener.wait()
                    while system.cluster.psql("postgres", """
                            SELECT count(*) FROM pg_stat_activity
                            WHERE application_name = 'jq-bench-listener'""") != "0":
                        time.sleep(0.1)
            figures[variant].append(r["jobs_per_s"])
            print(f"  w1      run {run + 1}  notify {variant:8}  {r['jobs_per_s']:10.0f} jobs/s", flush=True)
    system.cluster.psql(system.name, "DELETE FROM jq_queues WHERE queue_name = 'bench'")
    return {k: statistics.median(v) for k, v in figures.items()}


RATE_LIMIT = 500


def rate_accuracy_workload(system, seconds=30):
    """The rate limiter's accuracy: W3 for `seconds` on a queue limited to RATE_LIMIT claims a
    second, then the claims of each whole one-second window (by the claim's clock) against it."""
    system.cluster.psql(system.name, f"""SELECT jq_configure('bench', '{{"rate_limit": {RATE_LIMIT}, "rate_period": "1 second"}}')""")
    r = throughput_run(system, "w3", "w3_claim_complete", 1, seconds, {}, RATE_LIMIT * seconds * 2)
    rows = system.cluster.psql(system.name, """
        SELECT count(*) FROM jq_jobs WHERE status = 'succeeded'
        GROUP BY date_trunc('second', claimed_at) ORDER BY date_trunc('second', claimed_at)""").split()
    system.cluster.psql(system.name, """SELECT jq_configure('bench', '{"rate_limit": null, "rate_period": null}')""")
    # The first and last windows are cut by the run's start and end.
    windows = sorted(int(n) for n in rows[1:-1])
    # pgbench's rate counts the claims that found nothing as well: the jobs are what succeeded.
    claimed = sum(int(n) for n in rows)
    result = {"rate": RATE_LIMIT, "windows": len(windows), "min": windows[0], "median": windows[len(windows) // 2],
              "max": windows[-1], "at_rate": sum(1 for n in windows if n == RATE_LIMIT),
              "jobs_per_s": claimed / seconds}
    print(f"  rate    {system.name:9} limit {RATE_LIMIT}/s: claims per window min {result['min']}, median "
          f"{result['median']}, max {result['max']}, {result['at_rate']} of {len(windows)} windows at the rate "
          f"({result['jobs_per_s']:.0f} jobs/s)", flush=True)
    return result


def stats_cost_workload(system, seconds, runs):
    """W3 on pg_jobqueue with the shared-memory counters off and on (pg_jobqueue.stats), runs
    alternating: what counting costs the claim + complete cycle."""
    figures = {"off": [], "on": []}
    size = max(20000, EXPECTED_RATE["w3"] * seconds * 3 // 2)
    for run in range(runs):
        for setting in ("off", "on"):
            system.cluster.psql("postgres", f"ALTER SYSTEM SET pg_jobqueue.stats = {setting}")
            system.cluster.psql("postgres", "SELECT pg_reload_conf()")
            r = throughput_run(system, "w3", "w3_claim_complete", 1, seconds, {}, size)
            figures[setting].append(r["jobs_per_s"])
            print(f"  w3      run {run + 1}  stats {setting:3}  {r['jobs_per_s']:10.0f} jobs/s", flush=True)
    system.cluster.psql("postgres", "ALTER SYSTEM RESET pg_jobqueue.stats")
    system.cluster.psql("postgres", "SELECT pg_reload_conf()")
    result = {k: statistics.median(v) for k, v in figures.items()}
    result["cost"] = 1 - result["on"] / result["off"]
    return result


def wake_latency_workload(cluster, jobs):
    """W8 (bench/wakeups.py): enqueue commit to job start with idle workers, three ways of waiting."""
    sys.path.insert(0, str(ROOT / "bench"))
    import wakeups  # needs psycopg; imported here so the other workloads run without it
    dsn = f"host=127.0.0.1 port={cluster.port} user=postgres dbname=jobqueue"
    result = wakeups.measure(dsn, jobs)
    for mode, r in result.items():
        print(f"  w8      {mode:7} p50 {r['p50_ms']:8.2f} ms  p99 {r['p99_ms']:8.2f} ms  ({r['jobs']} jobs)", flush=True)
    return result


def await_latency_workload(cluster, jobs):
    """W12 (bench/wakeups.py): enqueue commit to jq_await returning the finished job."""
    sys.path.insert(0, str(ROOT / "bench"))
    import wakeups
    dsn = f"host=127.0.0.1 port={cluster.port} user=postgres dbname=jobqueue"
    r = wakeups.measure_await(dsn, jobs)
    print(f"  w12     await   p50 {r['p50_ms']:8.2f} ms  p99 {r['p99_ms']:8.2f} ms  ({r['jobs']} jobs); after the "
          f"completion p50 {r['after_complete_p50_ms']:.2f} ms, p99 {r['after_complete_p99_ms']:.2f} ms", flush=True)
    return r


GOALS = [
    # (label, workload, numerator, denominator, goal with synchronous_commit on, goal with it off)
    ("W3 vs baseline", "w3", "jobqueue", "baseline", 1.0, 0.85),
    ("W3 vs pgmq", "w3", "jobqueue", "pgmq", 1.5, 1.5),
    ("W3 keep-nothing vs base", "w3", "jq_keep_nothing", "baseline", 1.1, 0.85),
    ("W3 aged backlog vs base", "w3", "jq_aged", "baseline", 1.0, 0.85),
    ("W4 (10) vs baseline", "w4_10", "jobqueue", "baseline", 1.2, 1.2),
    ("W4 (100) vs baseline", "w4_100", "jobqueue", "baseline", 1.2, 1.2),
    ("W1 vs baseline", "w1", "jobqueue", "baseline", 0.9, 0.9),
    ("W2 vs pgmq", "w2", "jobqueue", "pgmq", 1.0, 1.0),
    ("W11 1,000 keys vs W3", "w3", "jq_keys", "jobqueue", 0.8, 0.8),
    ("W13 DAG vs W3, run to end", "w13", "jq_dag", "jobqueue", 0.8, 0.8),
]
# WAL per W3 job against the baseline's, at most: (label, system, goal).
WAL_GOALS = [
    ("W3 WAL/job vs baseline", "jobqueue", 1.5),
    ("keep-nothing WAL/job", "jq_keep_nothing", 1.15),
]


def throughput_rows(result):
    """Each throughput figure as (workload, system, figures, pg_jobqueue's jobs/s over this system's)."""
    for workload, per_system in result["throughput"].items():
        ours = per_system["jobqueue"]["jobs_per_s"]
        for name, r in per_system.items():
            yield workload, name, r, ("" if name == "jobqueue" else f"{ours / r['jobs_per_s']:.2f}")


def report(passes):
    lines = [f"machine: {machine()}"]
    for sync, result in passes.items():
        lines.append(f"\nsynchronous_commit = {sync}")
        lines.append(f"{'workload':9} {'system':14} {'jobs/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
                     f"{'table MB':>9} {'index MB':>9} {'dead':>8} {'WAL/job':>8} {'steal %':>8} {'jq/this':>8}")
        for workload, name, r, ratio in throughput_rows(result):
            lines.append(f"{workload:9} {name:14} {r['jobs_per_s']:9.0f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} "
                         f"{r['table_bytes'] / 2**20:9.1f} {r['index_bytes'] / 2**20:9.1f} "
                         f"{r['dead_tuples']:8.0f} {r['wal_bytes_per_job']:8.0f} {r.get('steal_pct', 0):8.1f} {ratio:>8}")
        for name, r in result["claim_latency"].items():
            lines.append(f"w6        {name:9} claim p50 {r['small']['p50_ms']:.3f} ms with {r['small']['jobs']} jobs, "
                         f"{r['backlog']['p50_ms']:.3f} ms with {r['backlog']['jobs']}: {r['ratio_p50']:.2f}x")
        w7 = result["reap"]
        lines.append(f"w7        jobqueue  {w7['reaped']} leases reaped in {w7['seconds']:.2f} s, {w7['passes']} passes")
        w10 = result["retention"]
        lines.append(f"w10       jobqueue  {w10['pruned']} of {w10['jobs']} expired jobs pruned in {w10['seconds']:.3f} s, "
                     f"{w10['dead_tuples']} dead tuples, {w10['deleted_rows']} deleted rows")
        nc = result["notify_cost"]
        lines.append(f"w1        jobqueue  NOTIFY off {nc['off']:.0f} jobs/s, default and nobody listening {nc['on']:.0f}, "
                     f"default with a listener {nc['listened']:.0f}, always {nc.get('always', 0):.0f} jobs/s")
        ra = result["rate_accuracy"]
        lines.append(f"rate      jobqueue  limit {ra['rate']}/s: claims per whole window min {ra['min']}, median "
                     f"{ra['median']}, max {ra['max']}, {ra['at_rate']} of {ra['windows']} windows at the rate")
        sc = result.get("stats_cost")
        if sc:
            lines.append(f"w3        jobqueue  counters off {sc['off']:.0f} jobs/s, on {sc['on']:.0f} jobs/s: "
                         f"counting costs {sc['cost'] * 100:.1f}% (goal under 3%)")
        for mode, r in result["wake_latency"].items():
            lines.append(f"w8        {mode:9} enqueue commit to claim p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms")
        aw = result.get("await_latency")
        if aw:
            lines.append(f"w12       jq_await  enqueue commit to await return p50 {aw['p50_ms']:.2f} ms, p99 {aw['p99_ms']:.2f} ms; "
                         f"completion to await return p50 {aw['after_complete_p50_ms']:.2f} ms")
        lines.append("goals:")
        tp = result["throughput"]
        for label, workload, num, den, goal_on, goal_off in GOALS:
            goal = goal_on if sync == "on" else goal_off
            ratio = tp[workload][num]["jobs_per_s"] / tp[workload][den]["jobs_per_s"]
            lines.append(f"  {label:24} {ratio:5.2f}x  (goal {goal}x)  {'met' if ratio >= goal else 'SHORT'}")
        for label, system, goal in WAL_GOALS:
            wal = tp["w3"][system]["wal_bytes_per_job"] / tp["w3"]["baseline"]["wal_bytes_per_job"]
            lines.append(f"  {label:24} {wal:5.2f}x  (goal at most {goal}x)  {'met' if wal <= goal else 'SHORT'}")
        w5 = tp["w5"]["jobqueue"]["jobs_per_s"] / tp["w3"]["jobqueue"]["jobs_per_s"]
        lines.append(f"  {'W5 vs own W3':24} {w5:5.2f}x  (goal 0.8x)  {'met' if w5 >= 0.8 else 'SHORT'}")
        w6 = result["claim_latency"]["jobqueue"]["ratio_p50"]
        lines.append(f"  {'W6 backlog p50 / small':24} {w6:5.2f}x  (goal at most 1.5x)  {'met' if w6 <= 1.5 else 'SHORT'}")
        lines.append(f"  {'W7 seconds':24} {w7['seconds']:5.2f} s  (goal under 10 s)  {'met' if w7['seconds'] < 10 else 'SHORT'}")
        w9 = tp["w3"]["jq_history"]["jobs_per_s"] / tp["w3"]["jobqueue"]["jobs_per_s"]
        lines.append(f"  {'W9 10M history vs none':24} {w9:5.2f}x  (goal 0.95x)  {'met' if w9 >= 0.95 else 'SHORT'}")
        w10_met = w10["seconds"] < 1 and w10["dead_tuples"] == 0 and w10["pruned"] == w10["jobs"]
        lines.append(f"  {'W10 1M-job day pruned':24} {w10['seconds']:5.2f} s  (goal under 1 s, no dead tuples)  "
                     f"{'met' if w10_met else 'SHORT'}")
    return "\n".join(lines)


def steal_cell(r):
    """A cell's CPU steal, for results written before it was measured too."""
    return f"{r['steal_pct']:.1f}" if "steal_pct" in r else ""


def markdown(results):
    """The results file as the Markdown tables of bench/README.md."""
    meta, lines = results["meta"], []
    lines.append(f"{meta['date']}, `{meta['command']}`, pg_jobqueue {meta['pg_jobqueue']}, pgmq {meta['pgmq']}, "
                 f"{meta['server']}; {meta['runs']} runs of {meta['seconds']} s, {meta['clients']} clients, median"
                 f"{'; ' + meta['machine'] if 'machine' in meta else ''}.")
    for sync, result in results["passes"].items():
        lines += ["", f"`synchronous_commit = {sync}`", "",
                  "| workload | system | jobs/s | p50 ms | p99 ms | table MB | index MB | dead tuples | WAL bytes/job | CPU steal % | jobqueue / system |",
                  "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for workload, name, r, ratio in throughput_rows(result):
            lines.append(f"| {workload.upper().replace('_', ' batch ')} | {name} | {r['jobs_per_s']:,.0f} | "
                         f"{r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['table_bytes'] / 2**20:.1f} | "
                         f"{r['index_bytes'] / 2**20:.1f} | {r['dead_tuples']:,.0f} | "
                         f"{r.get('wal_bytes_per_job', float('nan')):,.0f} | {steal_cell(r)} | {ratio} |")
        if "claim_latency" in result:
            lines += ["", "| W6 | claim p50, 10,000 jobs | claim p50, 1,000,000 jobs | ratio |", "|---|---:|---:|---:|"]
            for name, r in result["claim_latency"].items():
                lines.append(f"| {name} | {r['small']['p50_ms']:.3f} ms | {r['backlog']['p50_ms']:.3f} ms | "
                             f"{r['ratio_p50']:.2f} |")
        if "reap" in result:
            w7 = result["reap"]
            lines += ["", f"W7: {w7['reaped']:,} expired leases reaped in {w7['seconds']:.2f} s, "
                          f"{w7['passes']} `jq_reap()` passes (the last finds none)."]
        if "retention" in result:
            w10 = result["retention"]
            lines += ["", f"W10: one `jq_prune()` removed {w10['pruned']:,} of the {w10['jobs']:,} jobs of an expired day "
                          f"in {w10['seconds']:.3f} s, leaving {w10['dead_tuples']:,} dead tuples and "
                          f"{w10['deleted_rows']:,} deleted rows in the history."]
        nc = result.get("notify_cost")
        if nc:
            lines += ["", "| W1 (pg_jobqueue) with the queue's NOTIFY | jobs/s |", "|---|---:|",
                      f"| off | {nc['off']:,.0f} |", f"| default (NULL), nobody listening | {nc['on']:,.0f} |",
                      f"| default (NULL), one session listening | {nc['listened']:,.0f} |"]
            if "always" in nc:
                lines.append(f"| on (true), every enqueue | {nc['always']:,.0f} |")
        ra = result.get("rate_accuracy")
        if ra:
            lines += ["", f"Rate limit of {ra['rate']} claims a second, W3 for 30 s: claims per whole one-second window "
                          f"min {ra['min']:,}, median {ra['median']:,}, max {ra['max']:,}; {ra.get('at_rate', 0)} of "
                          f"{ra['windows']} windows at the rate."]
        sc = result.get("stats_cost")
        if sc:
            lines += ["", f"W3 (pg_jobqueue) with the counters off: {sc['off']:,.0f} jobs/s; on: {sc['on']:,.0f} jobs/s; "
                          f"counting costs {sc['cost'] * 100:.1f}% (below zero: run-to-run noise)."]
        if result.get("wake_latency"):
            lines += ["", "| W8: enqueue commit to claim | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|"]
            labels = {"wait": "waiting claim (shared memory)", "notify": "LISTEN/NOTIFY + claim",
                      "poll": "polling every 1 s"}
            for mode, r in result["wake_latency"].items():
                lines.append(f"| {labels[mode]} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['max_ms']:.2f} |")
        aw = result.get("await_latency")
        if aw:
            lines += ["", "| W12: jq_await, idle workers | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|",
                      f"| enqueue commit to jq_await returning the finished job | {aw['p50_ms']:.2f} | "
                      f"{aw['p99_ms']:.2f} | {aw['max_ms']:.2f} |",
                      f"| the completion's commit to jq_await returning | {aw['after_complete_p50_ms']:.2f} | "
                      f"{aw['after_complete_p99_ms']:.2f} | |"]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one short run, a smaller backlog for W6")
    parser.add_argument("--seconds", type=int, help="seconds per throughput run")
    parser.add_argument("--runs", type=int, help="runs per workload (the median is reported)")
    parser.add_argument("--port", type=int, default=55497)
    parser.add_argument("--only", help="comma-separated synchronous_commit passes to run (on,off)")
    parser.add_argument("--workloads", help="comma-separated workloads to run (w1,...,w5, notify, rate, stats, w8, await, "
                        "cpu: W3's CPU per job over a fixed number of jobs); "
                        "W6 and W7 only when not given")
    parser.add_argument("--systems", help="comma-separated systems and variants to install and run "
                        "(jobqueue, baseline, pgmq, " + ", ".join(VARIANTS) + "); all when not given")
    parser.add_argument("--no-preload", action="store_true",
                        help="run the server as installed by default: without shared_preload_libraries")
    parser.add_argument("--server-defaults", action="store_true",
                        help="leave shared_buffers, max_wal_size, checkpoint_timeout and jit at PostgreSQL's defaults, "
                        "as on a server nobody tuned")
    parser.add_argument("--output", default=str(ROOT / "target/bench/results.json"))
    parser.add_argument("--markdown", metavar="RESULTS", help="print a results file as Markdown tables and exit")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return
    seconds = args.seconds or (3 if args.quick else 10)
    runs = args.runs or (1 if args.quick else 3)
    backlog = 100_000 if args.quick else 1_000_000
    sync_passes = (args.only or "on,off").split(",")

    pgmq_sql = sh(str(ROOT / "bench/fetch_pgmq.sh"), str(ROOT / "target/bench")).strip()
    if args.no_preload:
        SERVER_CONF[:] = [line for line in SERVER_CONF if "shared_preload_libraries" not in line]
    if args.server_defaults:
        SERVER_CONF[:] = [line for line in SERVER_CONF if line.split("=")[0].strip() not in TUNING]
    cluster = Cluster(args.port, os.path.join(tempfile.gettempdir(), "pg_jobqueue-bench"))
    cluster.start()
    try:
        systems = [System(cluster, name) for name in SYSTEMS]
        variants = [System(cluster, name, settings, workloads) for name, (settings, workloads) in VARIANTS.items()]
        if args.systems:
            chosen = args.systems.split(",")
            systems = [s for s in systems if s.name in chosen]
            variants = [s for s in variants if s.name in chosen]
        for system in systems + variants:
            system.install(pgmq_sql)
        version = cluster.psql("jobqueue", "SELECT extversion FROM pg_extension WHERE extname = 'pg_jobqueue'")
        passes = {}
        for sync in sync_passes:
            cluster.set_synchronous_commit(sync)
            print(f"synchronous_commit = {sync}: {runs} run(s) of {seconds} s, {CLIENTS} clients", flush=True)
            wanted = args.workloads.split(",") if args.workloads else None
            passes[sync] = {"throughput": throughput_workloads(systems + variants, seconds, runs, wanted)}
            if wanted and "cpu" in wanted:
                passes[sync]["cpu_per_job"] = cpu_per_job_workload(systems + variants, 1000 if args.quick else 5000, runs)
                base = passes[sync]["cpu_per_job"].get("baseline")
                for name, r in passes[sync]["cpu_per_job"].items():
                    ratio = f"  {r['server_us_per_job'] / base['server_us_per_job']:.2f}x the baseline's" if base else ""
                    print(f"  cpu     {name:14} server {r['server_us_per_job']:7.1f} us/job, client "
                          f"{r['client_us_per_job']:6.1f} us/job{ratio}", flush=True)
            if not wanted or "w13" in wanted:
                dag = dag_workload(systems + variants, runs)
                if dag:
                    passes[sync]["throughput"]["w13"] = dag
            if not wanted:
                passes[sync]["claim_latency"] = claim_latency_workload(systems, runs, backlog, 500 if args.quick else 2000)
                passes[sync]["reap"] = reap_workload(systems[0], 100_000)
            if not wanted or "w10" in wanted:
                passes[sync]["retention"] = retention_workload(systems[0], 1_000_000)
            if not wanted or "notify" in wanted:
                passes[sync]["notify_cost"] = notify_cost_workload(systems[0], seconds, runs)
            if not wanted or "rate" in wanted:
                passes[sync]["rate_accuracy"] = rate_accuracy_workload(systems[0])
            # The counters are in shared memory, which only a preloaded library has: without preload
            # there is nothing to count, and a server that never loaded the library refuses its setting.
            if (not wanted or "stats" in wanted) and not args.no_preload:
                passes[sync]["stats_cost"] = stats_cost_workload(systems[0], seconds, runs)
            if not wanted or "w8" in wanted:
                passes[sync]["wake_latency"] = wake_latency_workload(cluster, 100 if args.quick else 300)
            if not wanted or "await" in wanted:
                passes[sync]["await_latency"] = await_latency_workload(cluster, 100 if args.quick else 300)
    finally:
        cluster.stop()
    if not args.workloads:
        print(report(passes))
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "command": " ".join(sys.argv),
            "pg_jobqueue": version, "pgmq": "0.33.7", "seconds": seconds, "runs": runs, "clients": CLIENTS,
            "server_conf": SERVER_CONF, "server": sh("pg_config", "--version").strip(), "machine": machine()}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps({"meta": meta, "passes": passes}, indent=2))
    print(f"\nwritten to {args.output}")


if __name__ == "__main__":
    main()
