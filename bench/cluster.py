#!/usr/bin/env python3
"""Queues over several servers (guide, "Scaling out"): what the router costs, against one server
called directly.

In one run, with synchronous_commit on and then off, throughput of W1 (one jq_enqueue per
transaction) and W3 (claim one job, then complete it) for: one server called directly; the router
(pg_jobqueue_router over PL/Proxy) with 1 server behind it; with 2; with 3. Behind the router the
queue is spread over its servers. The scripts are bench/systems/jobqueue's own W1 and W3: the router
takes the same calls. See bench/README.md ("Queues over several servers") for the method.

    bench/cluster.py                  3 runs of 5 s per workload and configuration, median
    bench/cluster.py --seconds 10     longer runs
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "bench" / "systems" / "jobqueue"
BIN = f"/usr/lib/postgresql/{os.environ.get('PG', '15')}/bin"  # scripts/pgversion.sh's PG
CLIENTS = 8
NODES = 3
# bench/run.py's configuration, with less shared memory each: four servers share this machine.
NODE_CONF = ["shared_buffers = 256MB", "max_wal_size = 8GB", "checkpoint_timeout = 30min", "jit = off",
             "shared_preload_libraries = 'pg_jobqueue'"]
ROUTER_CONF = ["shared_buffers = 128MB", "jit = off"]
# (label, database, servers behind it): the database is a node's own ("bench", node 0) for the
# direct calls, or a router database over the first k nodes.
CONFIGS = [("direct", "bench", 1), ("router, 1 server", "router1", 1), ("router, 2 servers", "router2", 2),
           ("router, 3 servers", "router3", 3)]
WORKLOADS = [("w1", "w1_enqueue"), ("w3", "w3_claim_complete")]
# W3 jobs a second expected at most, to size the prefill so that no run drains its queue; a run
# that drains anyway is repeated with more.
EXPECTED_W3_RATE = 6000


def sh(*args):
    return subprocess.run(args, check=True, text=True, capture_output=True).stdout


class Server:
    """A throwaway server of scripts/pg.sh; psql and pgbench reach it by port."""

    def __init__(self, name, port, conf):
        self.dir, self.port, self.conf = os.path.join(tempfile.gettempdir(), f"pg_jobqueue-bench-{name}"), port, conf

    def start(self):
        sh(str(ROOT / "scripts/pg.sh"), "stop", self.dir)
        sh(str(ROOT / "scripts/pg.sh"), "start", self.dir, str(self.port), *self.conf)

    def stop(self):
        subprocess.run([str(ROOT / "scripts/pg.sh"), "stop", self.dir], check=False)

    def conn(self, db):
        return ["-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-d", db]

    def psql(self, db, sql=None, file=None, variables=()):
        args = [f"{BIN}/psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", *self.conn(db)]
        for variable in variables:
            args += ["-v", variable]
        args += ["-f", str(file)] if file else ["-c", sql]
        return sh(*args).strip()


def set_up(nodes, router):
    """pg_jobqueue on each node, made node k (sql/router/node.sql); on the router, one database per
    configuration, its foreign server naming the first k nodes, the queue spread over them."""
    for k, node in enumerate(nodes):
        node.psql("postgres", "CREATE DATABASE bench")
        node.psql("bench", file=SCRIPTS / "setup.sql")
        node.psql("bench", file=ROOT / "sql/router/node.sql", variables=[f"node={k}"])
    for _, db, k in CONFIGS[1:]:
        partitions = ", ".join(f"p{i} 'host=127.0.0.1 port={nodes[i].port} dbname=bench'" for i in range(k))
        router.psql("postgres", f"CREATE DATABASE {db}")
        router.psql(db, f"""
            CREATE EXTENSION plproxy;
            CREATE SERVER pg_jobqueue FOREIGN DATA WRAPPER plproxy OPTIONS (modular_mapping '1', {partitions});
            CREATE USER MAPPING FOR PUBLIC SERVER pg_jobqueue;
            CREATE EXTENSION pg_jobqueue_router;
            SELECT jq_router_spread('bench');""")


def prepare(nodes, fill):
    """Every node's queue emptied and refilled with its share of `fill` jobs, vacuumed and
    checkpointed: every run starts from the same state."""
    for node in nodes:
        node.psql("bench", file=SCRIPTS / "reset.sql")
        if fill:
            node.psql("bench", file=SCRIPTS / "fill.sql", variables=[f"fill={fill // len(nodes)}"])
        for table in node.psql("bench", file=SCRIPTS / "tables.sql").split():
            node.psql("bench", f"VACUUM ANALYZE {table}")
        node.psql("bench", "CHECKPOINT")


def pgbench(server, db, script, seconds):
    """One pgbench run of `script` against `db`; returns transactions per second."""
    # The database last: pgbench's -d is --debug, whose output costs the client.
    args = [f"{BIN}/pgbench", "-n", "-M", "prepared", "-c", str(CLIENTS), "-j", "2", "-T", str(seconds),
            *server.conn(db)[:-2], "-f", str(SCRIPTS / f"{script}.sql"), db]
    out = subprocess.run(args, text=True, capture_output=True)
    if out.returncode != 0 or "aborted" in out.stdout:
        sys.exit(f"pgbench failed on {db}/{script}:\n{out.stdout}\n{out.stderr}")
    return float(re.search(r"^tps = ([\d.]+)", out.stdout, re.M).group(1))


def measure(nodes, router, seconds, runs):
    """Jobs a second of each workload and configuration, median of `runs` (each run's figure under
    "runs"); runs alternate between configurations."""
    results = {}
    for workload, script in WORKLOADS:
        figures = {label: [] for label, _, _ in CONFIGS}
        for run in range(runs):
            for label, db, k in CONFIGS:
                behind = nodes[:k]
                fill = 0 if workload == "w1" else max(20000, EXPECTED_W3_RATE * seconds * 3 // 2)
                while True:
                    prepare(behind, fill)
                    tps = pgbench(nodes[0] if db == "bench" else router, db, script, seconds)
                    pending = sum(int(n.psql("bench", file=SCRIPTS / "pending.sql")) for n in behind)
                    if not fill or pending > 0:
                        break
                    print(f"    {label} {workload}: the queue drained; again with {fill * 3} jobs", flush=True)
                    fill *= 3
                figures[label].append(tps)
                print(f"  {workload} run {run + 1}  {label:18} {tps:9.0f} jobs/s", flush=True)
        results[workload] = {label: statistics.median(v) for label, v in figures.items()}
        results.setdefault("runs", {})[workload] = figures
    return results


def markdown(results):
    meta, lines = results["meta"], []
    lines.append(f"{meta['date']}, `{meta['command']}`, {meta['server']}; {meta['cpus']} CPUs shared by all "
                 f"{NODES + 1} servers and pgbench; {meta['runs']} runs of {meta['seconds']} s, {CLIENTS} clients, "
                 "median.")
    passes = results["passes"]
    header = "| workload | configuration |"
    rule = "|---|---|"
    for sync in passes:
        header += f" jobs/s, sync {sync} | vs direct |"
        rule += "---:|---:|"
    lines += ["", header, rule]
    for workload, _ in WORKLOADS:
        for label, _, _ in CONFIGS:
            row = f"| {workload.upper()} | {label} |"
            for sync, figures in passes.items():
                tps, direct = figures[workload][label], figures[workload]["direct"]
                row += f" {tps:,.0f} | {tps / direct:.2f} |"
            lines.append(row)
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=5, help="seconds per run")
    parser.add_argument("--runs", type=int, default=3, help="runs per workload and configuration (median)")
    parser.add_argument("--port", type=int, default=55480, help="the first of the four servers' ports")
    parser.add_argument("--output", default=str(ROOT / "target/bench/cluster.json"))
    parser.add_argument("--markdown", metavar="RESULTS", help="print a results file as Markdown and exit")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text())))
        return
    os.environ.pop("RUST_BACKTRACE", None)
    nodes = [Server(f"node{k}", args.port + k, NODE_CONF) for k in range(NODES)]
    router = Server("router", args.port + NODES, ROUTER_CONF)
    started, date = time.monotonic(), time.strftime("%Y-%m-%d %H:%M:%S %Z")
    try:
        for server in nodes + [router]:
            server.start()
        set_up(nodes, router)
        passes = {}
        for sync in ("on", "off"):
            for server in nodes + [router]:
                server.psql("postgres", f"ALTER SYSTEM SET synchronous_commit = {sync}")
                server.psql("postgres", "SELECT pg_reload_conf()")
            print(f"synchronous_commit = {sync}: {args.runs} run(s) of {args.seconds} s, {CLIENTS} clients", flush=True)
            passes[sync] = measure(nodes, router, args.seconds, args.runs)
    finally:
        for server in nodes + [router]:
            server.stop()
    meta = {"date": date, "command": " ".join(["bench/cluster.py", *sys.argv[1:]]),
            "server": sh(f"{BIN}/pg_config", "--version").strip(), "cpus": os.cpu_count(), "seconds": args.seconds,
            "runs": args.runs, "clients": CLIENTS, "node_conf": NODE_CONF, "router_conf": ROUTER_CONF,
            "minutes": round((time.monotonic() - started) / 60, 1)}
    results = {"meta": meta, "passes": passes}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=2))
    print()
    print(markdown(results))
    print(f"\nwritten to {args.output} ({meta['minutes']} min)")


if __name__ == "__main__":
    main()
