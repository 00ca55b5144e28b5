"""W8: how long a job waits between its enqueue's commit and a worker starting it, when workers are
idle, for three ways of waiting: the waiting claim (woken through shared memory), LISTEN/NOTIFY with
a plain claim, and polling once a second.

One producer commits one job at a time at random intervals (10-40 ms, so idle workers are the norm);
WORKERS workers claim, and complete at once. The latency of a job is the time from the producer's
COMMIT returning to a worker's claim returning it, both read from this process's monotonic clock.
Needs psycopg 3 (Debian's python3-psycopg).
"""

import random
import threading
import time

import psycopg

WORKERS = 2
QUEUE = "wake"


def _worker(dsn, mode, claimed, stop, name):
    with psycopg.connect(dsn, autocommit=True) as conn:
        event = threading.Event()
        if mode == "notify":
            listener = psycopg.connect(dsn, autocommit=True)
            listener.execute(f'LISTEN "jq_{QUEUE}"')

            def listen():
                try:
                    for _ in listener.notifies():
                        event.set()
                except (psycopg.Error, OSError):
                    pass  # the connection is closed at the end of the run

            threading.Thread(target=listen, daemon=True).start()
        while not stop.is_set():
            if mode == "wait":
                sql = "SELECT id, lease_token FROM jq_claim(%s, %s, wait => interval '1 second')"
            else:
                sql = "SELECT id, lease_token FROM jq_claim(%s, %s)"
            event.clear()
            row = conn.execute(sql, (QUEUE, name)).fetchone()
            if row is None:
                if mode == "notify":
                    event.wait(1.0)  # the notification, or a poll a second later as a fallback
                elif mode == "poll":
                    stop.wait(1.0)
                continue
            claimed[row[0]] = time.monotonic()
            conn.execute("SELECT jq_complete(%s, %s, %s)", (row[0], name, row[1]))
        if mode == "notify":
            listener.close()


def _run_mode(dsn, mode, jobs):
    claimed, committed, stop = {}, {}, threading.Event()
    threads = [threading.Thread(target=_worker, args=(dsn, mode, claimed, stop, f"{mode}-{i}"))
               for i in range(WORKERS)]
    for t in threads:
        t.start()
    time.sleep(1.5)  # every worker idle and waiting
    with psycopg.connect(dsn, autocommit=True) as producer:
        for _ in range(jobs):
            job_id = producer.execute("SELECT jq_enqueue(%s, '{}')", (QUEUE,)).fetchone()[0]
            committed[job_id] = time.monotonic()
            time.sleep(random.uniform(0.010, 0.040))
    deadline = time.monotonic() + 30
    while len(claimed) < jobs and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    latencies = sorted((claimed[i] - committed[i]) * 1000 for i in committed if i in claimed)
    if len(latencies) < jobs:
        raise SystemExit(f"W8 {mode}: only {len(latencies)} of {jobs} jobs were claimed")
    return {"jobs": jobs, "p50_ms": _pct(latencies, 0.50), "p99_ms": _pct(latencies, 0.99),
            "max_ms": latencies[-1]}


def _pct(ordered, p):
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def measure(dsn, jobs):
    """Latency per mode: {"wait": {...}, "notify": {...}, "poll": {...}}."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM jq_live_jobs WHERE id IN (SELECT id FROM jq_jobs WHERE queue_name = %s)", (QUEUE,))
    return {mode: _run_mode(dsn, mode, jobs) for mode in ("wait", "notify", "poll")}


def measure_await(dsn, jobs):
    """W12: a caller that enqueues a job and waits for its result with jq_await, with idle workers
    (waiting claims) that claim it and complete it at once. Per job: from the enqueue's commit to
    jq_await returning the finished job (enqueue, claim, complete, await returns), and from the
    completion's commit returning in the worker to jq_await returning."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM jq_live_jobs WHERE id IN (SELECT id FROM jq_jobs WHERE queue_name = %s)", (QUEUE,))
    completed, stop = {}, threading.Event()

    def worker(name):
        with psycopg.connect(dsn, autocommit=True) as conn:
            while not stop.is_set():
                row = conn.execute("SELECT id, lease_token FROM jq_claim(%s, %s, wait => interval '1 second')",
                                   (QUEUE, name)).fetchone()
                if row is not None:
                    conn.execute("SELECT jq_complete(%s, %s, %s, result => '{\"done\": true}')", (row[0], name, row[1]))
                    completed[row[0]] = time.monotonic()

    threads = [threading.Thread(target=worker, args=(f"await-{i}",)) for i in range(WORKERS)]
    for t in threads:
        t.start()
    time.sleep(1.5)
    total, after = [], []
    with psycopg.connect(dsn, autocommit=True) as caller:
        for _ in range(jobs):
            job_id = caller.execute("SELECT jq_enqueue(%s, '{}')", (QUEUE,)).fetchone()[0]
            enqueued = time.monotonic()
            row = caller.execute("SELECT status FROM jq_await(%s, interval '30 seconds')", (job_id,)).fetchone()
            returned = time.monotonic()
            if row is None or row[0] != "succeeded":
                raise SystemExit(f"W12: job {job_id} did not finish in 30 s")
            total.append((returned - enqueued) * 1000)
            # The worker notes its completion after the commit returns; the awaiter can return first.
            after.append(max(0.0, returned - completed.get(job_id, returned)) * 1000)
            time.sleep(random.uniform(0.010, 0.040))
    stop.set()
    for t in threads:
        t.join()
    total.sort()
    after.sort()
    return {"jobs": jobs, "p50_ms": _pct(total, 0.50), "p99_ms": _pct(total, 0.99), "max_ms": total[-1],
            "after_complete_p50_ms": _pct(after, 0.50), "after_complete_p99_ms": _pct(after, 0.99)}
