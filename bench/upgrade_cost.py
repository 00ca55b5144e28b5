#!/usr/bin/env python3
"""What `ALTER EXTENSION pg_jobqueue UPDATE TO '0.3.0'` costs a database of 0.2.0 with many jobs
(guide, "Upgrading"), while clients keep calling.

One throwaway server (scripts/pg.sh), preloaded as a production server would be, with the
background worker serving the database. The library installed is the current one (it always is:
see tests/harness/tests/upgrade.rs), so 0.2.0's install script is run and its jq_jobs is filled
directly, as 0.2.0's functions left their jobs: per 1,000 jobs 900 succeeded over the past six
days (50 of them after a failure), 64 pending (a quarter scheduled later, some with dedup or
ordering keys, several priorities), 30 dead (three failures each), 5 cancelled and 1 running under
a live lease; 100 more running jobs whose leases have expired, for the background worker to reap
after the update. Every job has an event row per failure or cancellation, as 0.2.0 wrote them.

Then, after a restart (timed: the procedure restarts the server for its new library), client
sessions start calling, and the update runs in one more session. Measured:

  * the update's wall time, and where it goes (pg_stat_statements, nested statements included);
  * the locks it holds: pg_locks sampled from another session every SAMPLE seconds, each lock
    with the moment it was first seen; every lock is held until the update commits;
  * the WAL it writes (pg_current_wal_lsn before and after, pg_wal_lsn_diff; the clients write
    nothing while they are refused) and pg_stat_wal's records and full-page images;
  * what each client saw before, during and after it: a claimer (claim, then complete), an
    enqueuer, the holder of a lease from before the update (heartbeats), and a monitor reading
    the jq_queue_stats view; each call's outcome and how long it took;
  * how soon the background worker reaps the expired leases once the update has committed;
  * dead tuples left in the new tables (pgstattuple).

A reader of 0.2.0's views can deadlock with the update, and the update may be the one cancelled
(40P01): that attempt is recorded, and the update runs again without the monitor.

A benchmark measures: nothing here is asserted about time.

    bench/upgrade_cost.py                 1,000,000 jobs
    bench/upgrade_cost.py --jobs 200000
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
BIN = f"/usr/lib/postgresql/{os.environ.get('PG', '15')}/bin"  # scripts/pgversion.sh's PG
DATABASE = "upgrade"
# bench/run.py's server, preloaded, with pg_stat_statements counting the statements of the update
# script one by one.
CONF = ["shared_buffers = 1GB", "max_wal_size = 8GB", "checkpoint_timeout = 30min", "jit = off",
        "shared_preload_libraries = 'pg_jobqueue,pg_stat_statements'",
        f"pg_jobqueue.reaper_databases = '{DATABASE}'", "pg_stat_statements.track = all",
        "pg_stat_statements.max = 10000"]
SAMPLE = 0.05  # seconds between two looks at pg_locks
PAUSE = 0.05   # seconds a client waits between two calls
EXPIRED = 100  # leases already expired when the update runs

# The jobs of 0.2.0 as its functions left them (see the module's docstring), `:jobs` of them, in
# id order over the past six days. `r` is a job's place in each thousand, which decides its kind.
FILL = """
INSERT INTO jq_queues (queue_name) SELECT 'q' || n FROM generate_series(0, 7) AS n;
INSERT INTO jq_jobs (queue_name, payload, status, priority, available_at, attempt_count, max_attempts,
                     lease_owner, lease_token, lease_expires_at, lease_length, claimed_at,
                     last_error_code, last_error_message, dedup_key, ordering_key, created_at, finished_at)
SELECT 'q' || (i % 8),
       jsonb_build_object('to', 'user-' || i || '@example.com', 'template', 'welcome', 'account', i % 50000),
       k.status,
       CASE WHEN k.status = 'pending' THEN (r % 3) * 5 ELSE 0 END,
       CASE WHEN k.status = 'pending' AND r % 4 = 0 THEN now() + interval '1 hour' ELSE t.created END,
       CASE k.status WHEN 'succeeded' THEN 1 + (r % 18 = 0)::int WHEN 'dead' THEN 3
                     WHEN 'running' THEN 1 ELSE 0 END,
       CASE WHEN k.status = 'dead' THEN 3 ELSE 8 END,
       CASE WHEN k.status = 'running' THEN 'worker-' || (i % 16) END,
       CASE k.status WHEN 'succeeded' THEN 1 + (r % 18 = 0)::int WHEN 'dead' THEN 3
                     WHEN 'running' THEN 1 ELSE 0 END,
       CASE WHEN k.status = 'running' THEN now() + interval '1 hour' END,
       CASE WHEN k.status IN ('succeeded', 'dead', 'running') THEN interval '1 minute' END,
       CASE WHEN k.status = 'running' THEN now()
            WHEN k.status IN ('succeeded', 'dead') THEN t.created + interval '1 second' END,
       CASE WHEN k.status = 'dead' OR (k.status = 'succeeded' AND r % 18 = 0) THEN 'SMTP_TIMEOUT' END,
       CASE WHEN k.status = 'dead' OR (k.status = 'succeeded' AND r % 18 = 0) THEN 'connect timed out' END,
       CASE WHEN k.status = 'pending' AND r % 5 = 0 THEN 'dedup-' || i END,
       CASE WHEN k.status = 'pending' AND r % 7 = 0 THEN 'account-' || (i % 100) END,
       t.created,
       CASE WHEN k.status IN ('succeeded', 'dead', 'cancelled') THEN t.created + interval '2 seconds' END
FROM generate_series(1, %(jobs)s) AS i
CROSS JOIN LATERAL (SELECT i % 1000 AS r) AS place
CROSS JOIN LATERAL (SELECT CASE WHEN r < 900 THEN 'succeeded' WHEN r < 964 THEN 'pending'
                                WHEN r < 994 THEN 'dead' WHEN r < 999 THEN 'cancelled'
                                ELSE 'running' END::jq_status AS status) AS k
CROSS JOIN LATERAL (SELECT now() - interval '6 days' * (1 - i::float8 / %(jobs)s) AS created) AS t
ORDER BY i;
INSERT INTO jq_jobs (queue_name, payload, status, available_at, attempt_count, max_attempts, lease_owner,
                     lease_token, lease_expires_at, lease_length, claimed_at, created_at)
SELECT 'q0', '{"lost": true}', 'running', now() - interval '2 minutes', 1, 8, 'lost-worker', 1,
       now() - interval '1 minute', interval '1 minute', now() - interval '2 minutes', now() - interval '2 minutes'
FROM generate_series(1, %(expired)s);
-- Events as 0.2.0 wrote them: one per failure (three for a dead job), one per cancellation.
INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, worker, lease_token, error_code, error_message)
SELECT j.id, j.queue_name, 'failed', CASE WHEN j.status = 'dead' AND a = 3 THEN 'dead' ELSE 'pending' END::jq_status,
       j.created_at + a * interval '1 second', a, 'worker-' || (j.id % 16), a, 'SMTP_TIMEOUT', 'connect timed out'
FROM jq_jobs j CROSS JOIN generate_series(1, 3) AS a
WHERE (j.status = 'dead') OR (j.status = 'succeeded' AND j.attempt_count = 2 AND a = 1)
ORDER BY j.id, a;
INSERT INTO jq_job_events (job_id, queue_name, event, status, at, attempt, lease_token)
SELECT j.id, j.queue_name, 'cancelled', 'cancelled', j.finished_at, 0, 0 FROM jq_jobs j WHERE j.status = 'cancelled';
"""


def sh(*args):
    return subprocess.run(args, check=True, text=True, capture_output=True).stdout


class Client(threading.Thread):
    """A session that makes one call again and again, PAUSE apart, and notes each call: when it
    started and ended (this process's monotonic clock) and what came back."""

    def __init__(self, name, dsn, call, stop):
        super().__init__(name=name, daemon=True)
        self.dsn, self.call, self.stop, self.calls = dsn, call, stop, []

    def run(self):
        with psycopg.connect(self.dsn, autocommit=True, application_name=f"bench-{self.name}") as conn:
            while not self.stop.is_set():
                began = time.monotonic()
                try:
                    outcome = self.call(conn)
                except psycopg.Error as e:
                    outcome = f"{e.sqlstate} {(e.diag.message_primary or str(e)).strip()}"
                self.calls.append((began, time.monotonic(), outcome))
                self.stop.wait(PAUSE)


def claimer(conn):
    row = conn.execute("SELECT id, lease_token FROM jq_claim('q1', 'bench-claimer')").fetchone()
    if row is None:
        return "ok: nothing to claim"
    done = conn.execute("SELECT jq_complete(%s, 'bench-claimer', %s)", row).fetchone()[0]
    return "ok: claimed and completed" if done else "completion refused"


def enqueuer(conn):
    conn.execute("SELECT jq_enqueue('q2', '{\"from\": \"bench\"}')")
    return "ok: enqueued"


def holder(lease):
    def call(conn):
        kept = conn.execute("SELECT jq_heartbeat(%s, %s, %s)", lease).fetchone()[0]
        return "ok: lease kept" if kept else "lease refused"
    return call


def monitor(conn):
    conn.execute("SELECT count(*) FROM jq_queue_stats").fetchone()
    return "ok: read"


def statement(text):
    """A statement of the update script without its leading comment, on one line."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    return " ".join(" ".join(lines).split())[:110]


def phases(calls, start, end):
    """Each call's phase by when it started: before the update, during it, after its commit."""
    out = {}
    for began, ended, outcome in calls:
        phase = "before" if began < start else "during" if began < end else "after"
        p = out.setdefault(phase, {"calls": 0, "outcomes": {}, "longest_s": 0.0})
        p["calls"] += 1
        p["outcomes"][outcome] = p["outcomes"].get(outcome, 0) + 1
        p["longest_s"] = round(max(p["longest_s"], ended - began), 3)
    # A call that began during the update and ended after it: how long it waited past the commit.
    ok_after = [ended for began, ended, outcome in calls if outcome.startswith("ok") and ended >= end]
    out["first_ok_after_commit_s"] = round(min(ok_after) - end, 3) if ok_after else None
    return out


class LockSampler(threading.Thread):
    """pg_locks every SAMPLE seconds: the update's own locks (with when each was first seen) and
    every lock another session waits for."""

    def __init__(self, dsn, pid, t0):
        super().__init__(daemon=True)
        self.dsn, self.pid, self.t0, self.stop = dsn, pid, t0, threading.Event()
        self.held, self.waits, self.samples = {}, {}, 0

    def run(self):
        with psycopg.connect(self.dsn, autocommit=True, application_name="bench-locks") as conn:
            while not self.stop.is_set():
                now = time.monotonic() - self.t0
                rows = conn.execute(
                    """SELECT l.pid, l.locktype, coalesce(l.relation, l.objid)::oid::bigint, l.classid::regclass::text,
                              l.mode, l.granted, a.application_name
                       FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
                       WHERE l.pid = %s OR NOT l.granted""", (self.pid,)).fetchall()
                self.samples += 1
                for pid, locktype, oid, classid, mode, granted, app in rows:
                    if pid == self.pid and granted:
                        self.held.setdefault((locktype, oid, classid, mode), now)
                    elif not granted:
                        w = self.waits.setdefault((app or str(pid), locktype, oid, mode), [now, now])
                        w[1] = now
                self.stop.wait(SAMPLE)

    def waits_list(self):
        return [{"session": app, "locktype": lt, "object": oid, "mode": mode, "from_s": round(a, 2), "to_s": round(b, 2)}
                for (app, lt, oid, mode), (a, b) in self.waits.items()]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", 1_000_000)))
    parser.add_argument("--port", type=int, default=int(os.environ.get("BENCH_PORT", 55494)))
    parser.add_argument("--output", default=str(ROOT / "target/bench/upgrade.json"))
    args = parser.parse_args()
    os.environ.pop("RUST_BACKTRACE", None)
    pgdir = os.path.join(tempfile.gettempdir(), "pg_jobqueue-bench-upgrade")
    pg = str(ROOT / "scripts/pg.sh")
    dsn = f"host=127.0.0.1 port={args.port} user=postgres dbname={DATABASE}"
    date, results = time.strftime("%Y-%m-%d %H:%M:%S %Z"), {}
    sh(pg, "stop", pgdir)
    sh(pg, "start", pgdir, str(args.port), *CONF)
    try:
        with psycopg.connect(dsn.replace(f"dbname={DATABASE}", "dbname=postgres"), autocommit=True) as c:
            c.execute(f"CREATE DATABASE {DATABASE}")
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("CREATE EXTENSION pg_stat_statements")
            c.execute("CREATE EXTENSION pgstattuple")
            c.execute("CREATE EXTENSION pg_jobqueue VERSION '0.2.0'")
            print(f"filling 0.2.0's jq_jobs with {args.jobs:,} jobs (+{EXPIRED} expired leases) ...", flush=True)
            began = time.monotonic()
            c.execute(FILL.replace("%(jobs)s", str(args.jobs)).replace("%(expired)s", str(EXPIRED)))
            c.execute("VACUUM ANALYZE")
            c.execute("CHECKPOINT")
            results["fill_s"] = round(time.monotonic() - began, 1)
            results["before"] = {
                "jobs": dict(c.execute("SELECT status::text, count(*) FROM jq_jobs GROUP BY 1 ORDER BY 1").fetchall()),
                "events": c.execute("SELECT count(*) FROM jq_job_events").fetchone()[0],
                "jq_jobs_bytes": c.execute("SELECT pg_total_relation_size('jq_jobs')").fetchone()[0],
                "jq_job_events_bytes": c.execute("SELECT pg_total_relation_size('jq_job_events')").fetchone()[0],
            }
            lease = c.execute("SELECT id, lease_owner, lease_token FROM jq_jobs WHERE status = 'running'"
                              " AND lease_expires_at > now() ORDER BY id LIMIT 1").fetchone()
            names = dict(c.execute("SELECT oid::bigint, relname::text FROM pg_class").fetchall())
            # The extension's relations of 0.2.0: what clients and monitoring can lock meanwhile.
            old = {oid for (oid,) in c.execute(
                """SELECT c.oid::bigint FROM pg_class c JOIN pg_depend d ON d.classid = 'pg_class'::regclass
                   AND d.objid = c.oid AND d.deptype = 'e' JOIN pg_extension e ON e.oid = d.refobjid
                   WHERE e.extname = 'pg_jobqueue'""").fetchall()}
            old |= {oid for (oid,) in c.execute(
                "SELECT indexrelid::bigint FROM pg_index WHERE indrelid = ANY(%s)", (list(old),)).fetchall()}
        print(f"filled in {results['fill_s']} s: {results['before']}", flush=True)

        # The procedure restarts a preloaded server for its new library; how long it is down here.
        began = time.monotonic()
        sh(pg, "halt", pgdir)
        sh(pg, "start", pgdir, str(args.port))
        results["restart_s"] = round(time.monotonic() - began, 2)

        stop, monitor_stop = threading.Event(), threading.Event()
        clients = [Client("claimer", dsn, claimer, stop), Client("enqueuer", dsn, enqueuer, stop),
                   Client("holder", dsn, holder(lease), stop), Client("monitor", dsn, monitor, monitor_stop)]
        for client in clients:
            client.start()
        time.sleep(2)  # what they see before the update

        with psycopg.connect(dsn, autocommit=True, application_name="bench-update") as up:
            pid = up.execute("SELECT pg_backend_pid()").fetchone()[0]
            # A reader of 0.2.0's views can deadlock with the update, and the update may be the one
            # cancelled (40P01): then nothing changed, and it is run again with the monitor stopped.
            results["attempts"], start = [], time.monotonic()
            while True:
                up.execute("SELECT pg_stat_statements_reset()")
                lsn0, records0, fpi0 = up.execute(
                    "SELECT pg_current_wal_lsn(), wal_records, wal_fpi FROM pg_stat_wal").fetchone()
                sampler = LockSampler(dsn, pid, time.monotonic())
                sampler.start()
                began = time.monotonic()
                try:
                    up.execute("ALTER EXTENSION pg_jobqueue UPDATE TO '0.3.0'")
                    error = None
                except psycopg.errors.DeadlockDetected as e:
                    error = f"{e.sqlstate} {e.diag.message_primary}"
                end = time.monotonic()
                sampler.stop.set()
                sampler.join()
                results["attempts"].append({"s": round(end - began, 2), "error": error,
                                            "monitor": not monitor_stop.is_set(), "waits": sampler.waits_list()})
                if error is None or len(results["attempts"]) == 3:
                    break
                monitor_stop.set()
                print(f"the update was cancelled as a deadlock after {end - began:.2f} s; again without the monitor",
                      flush=True)
            results["update_s"] = round(end - began, 2)
            wal = up.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)::bigint, s.wal_records, s.wal_fpi"
                             " FROM pg_stat_wal s", (lsn0,)).fetchone()
            results["wal"] = {"bytes": wal[0], "records": wal[1] - records0, "full_page_images": wal[2] - fpi0}
            # The update script's statements (nested in ALTER EXTENSION), read at once: the clients'
            # own nested statements after the commit add a few milliseconds.
            results["statements"] = [
                {"ms": round(ms), "rows": rows, "query": statement(q)}
                for q, ms, rows in up.execute(
                    """SELECT query, total_exec_time, rows FROM pg_stat_statements
                       WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                         AND NOT toplevel AND total_exec_time > 20
                       ORDER BY total_exec_time DESC LIMIT 10""").fetchall()]
            # Reaped by the background worker: every lease that had expired before the update.
            reaped = None
            while time.monotonic() - end < 120:
                left = up.execute("SELECT count(*) FROM jq_live_jobs WHERE lease_owner = 'lost-worker'").fetchone()[0]
                if left == 0:
                    reaped = round(time.monotonic() - end, 2)
                    break
                time.sleep(0.05)
            results["expired_leases_reaped_after_commit_s"] = reaped
            time.sleep(2)  # what the clients see after it
            stop.set()
            monitor_stop.set()
            for client in clients:
                client.join()
            results["clients"] = {c.name: phases(c.calls, start, end) for c in clients}

            names.update(dict(up.execute("SELECT oid::bigint, relname::text FROM pg_class").fetchall()))
            results["locks"] = sorted(
                ({"locktype": lt, "object": names.get(oid, f"{classid or 'oid'} {oid}") if oid else None, "mode": mode,
                  "first_seen_s": round(seen, 2), "of_0_2_0": lt == "relation" and oid in old}
                 for (lt, oid, classid, mode), seen in sampler.held.items()),
                key=lambda lock: lock["first_seen_s"])
            results["lock_samples"] = sampler.samples
            for attempt in results["attempts"]:
                for wait in attempt["waits"]:
                    wait["object"] = names.get(wait["object"], wait["object"])
            results["after"] = {
                "live_jobs": dict(up.execute("SELECT status::text, count(*) FROM jq_live_jobs GROUP BY 1 ORDER BY 1"
                                             ).fetchall()),
                "history": up.execute("SELECT count(*) FROM jq_job_history").fetchone()[0],
                "dead_tuples": dict(up.execute(
                    """SELECT t, (pgstattuple(t)).dead_tuple_count FROM unnest(ARRAY['jq_live_jobs',
                           'jq_job_history_default', 'jq_job_events']) AS t""").fetchall()),
                "bytes": dict(up.execute(
                    """SELECT t, pg_total_relation_size(t) FROM unnest(ARRAY['jq_live_jobs',
                           'jq_job_history_default', 'jq_job_events']) AS t""").fetchall()),
            }
    finally:
        subprocess.run([pg, "stop", pgdir], check=False)

    results["meta"] = {"date": date, "command": " ".join(["bench/upgrade_cost.py", *sys.argv[1:]]),
                       "jobs": args.jobs, "server": sh(f"{BIN}/pg_config", "--version").strip(),
                       "cpus": os.cpu_count(), "conf": CONF, "lock_sample_s": SAMPLE, "client_pause_s": PAUSE}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=2))
    report(results)
    print(f"\nwritten to {args.output}")


def report(r):
    m = r["meta"]
    print(f"\n{m['date']}, {m['command']}, {m['server']}, {m['cpus']} CPUs; {m['jobs']:,} jobs")
    b = r["before"]
    print(f"before: {b['jobs']}, {b['events']:,} events; jq_jobs {b['jq_jobs_bytes'] / 2**20:,.0f} MiB,"
          f" jq_job_events {b['jq_job_events_bytes'] / 2**20:,.0f} MiB")
    print(f"restart (fast shutdown, start): {r['restart_s']} s")
    print(f"ALTER EXTENSION pg_jobqueue UPDATE TO '0.3.0': {r['update_s']} s")
    w = r["wal"]
    print(f"WAL: {w['bytes']:,} bytes ({w['bytes'] / 2**20:,.0f} MiB), {w['records']:,} records,"
          f" {w['full_page_images']:,} full-page images")
    print("where the time went (pg_stat_statements, ms):")
    for s in r["statements"]:
        print(f"  {s['ms']:>8,}  {s['rows']:>9,} rows  {s['query']}")
    print(f"locks held by the update on 0.2.0's tables, indexes and views, each until its commit at {r['update_s']} s"
          f" (first seen, in {r['lock_samples']} samples):")
    others = {}
    for lock in r["locks"]:
        if lock["of_0_2_0"]:
            print(f"  {lock['first_seen_s']:>7} s  {lock['mode']:<22} {lock['object']}")
        else:
            others[(lock["locktype"], lock["mode"])] = others.get((lock["locktype"], lock["mode"]), 0) + 1
    print("  and on what it made or on catalogs: "
          + ", ".join(f"{n} {lt} {mode}" for (lt, mode), n in sorted(others.items())))
    for n, attempt in enumerate(r["attempts"], 1):
        waited = sum(w["to_s"] - w["from_s"] + m["lock_sample_s"] for w in attempt["waits"]
                     if w["session"] == "bench-update")
        print(f"attempt {n} ({'with' if attempt['monitor'] else 'without'} the monitor): {attempt['s']} s,"
              f" {attempt['error'] or 'committed'}; sessions seen waiting for a lock"
              f" (the update itself about {waited:.1f} s in all):")
        for wait in attempt["waits"]:
            print(f"  {wait['session']}: {wait['mode']} on {wait['locktype']} {wait['object']},"
                  f" from {wait['from_s']} s to {wait['to_s']} s")
    print("clients (calls by when they began; longest call; first success after the commit):")
    for name, c in r["clients"].items():
        print(f"  {name}: first ok {c['first_ok_after_commit_s']} s after the commit")
        for phase in ("before", "during", "after"):
            if phase in c:
                p = c[phase]
                print(f"    {phase:<6} {p['calls']:>5} calls, longest {p['longest_s']} s: {p['outcomes']}")
    print(f"expired leases reaped by the background worker {r['expired_leases_reaped_after_commit_s']} s after the commit")
    a = r["after"]
    print(f"after: live {a['live_jobs']}, history {a['history']:,}; dead tuples {a['dead_tuples']};"
          f" bytes {a['bytes']}")


if __name__ == "__main__":
    main()
