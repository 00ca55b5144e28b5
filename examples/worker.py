#!/usr/bin/env python3
"""A pg_jobqueue worker in Python with psycopg 3: claim, work, report.

    python3 examples/worker.py --dsn "host=... dbname=..." --queue emails

Every call runs in autocommit, so each claim, completion and failure commits at once and a job is
held by its lease, never by an open transaction. The waiting claim sleeps in the server until a job
arrives (or `--wait` passes), so an idle worker costs the database almost nothing.

While a job runs, a thread renews its lease with jq_heartbeat every third of the lease, on a
connection of its own: a heartbeat sent on a connection that handle() uses could land inside a
transaction of handle()'s, and renew nothing until that commits. A refused heartbeat means the job
is no longer this worker's (it was cancelled, or its lease expired and it may already run
elsewhere): the worker then reports nothing, and handle() stops at its next lease.check().

A lost connection (a server restart, a failover) is made anew, and a heartbeat or report that did
not get through is sent again on the new connection while the lease may still hold; a late one is
refused by its lease token. With a primary and its standbys in the connection string, the worker
follows a failover to whichever server takes writes:

    --dsn "host=db1,db2 dbname=app target_session_attrs=read-write"

Each claim and report is logged on stderr, one line each, as jq-worker logs them.
"""
import argparse
import os
import signal
import socket
import sys
import threading
import time
from datetime import datetime, timezone

import psycopg
from psycopg.types.json import Jsonb


class BadPayload(Exception):
    """The payload will not improve: fail without retrying."""


class LeaseLost(Exception):
    """The job is no longer this worker's: stop working on it, and report nothing."""


def handle(payload, lease):
    """Your work goes here. It must be safe to run twice: delivery is at least once, so an effect
    outside the database should use the job id, lease.job_id, as its idempotency key. The lease is
    renewed while it runs; long work calls lease.check() between its steps, which raises LeaseLost
    once the lease is lost. What it returns, unless None, is the job's result (any value json.dumps
    takes), which jq_result, jq_await and the jobs that depend on this one (jq_parent_results) read."""
    if "to" not in payload:
        raise BadPayload("payload has no 'to'")
    lease.check()
    # ... send the email to payload["to"] ...


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--queue", required=True)
    parser.add_argument("--wait", type=float, default=5.0, help="seconds a claim waits for a job")
    parser.add_argument("--lease", type=float, help="seconds of lease per claim (default: the queue's)")
    parser.add_argument("--name", default=f"{socket.gethostname()}-{os.getpid()}", help="worker name")
    parser.add_argument("--once-empty", action="store_true", help="exit when the queue has no live jobs")
    args = parser.parse_args()

    stopping = []
    # SIGTERM: finish the job in hand, then stop claiming. A waiting claim is at most --wait long.
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    db = Connection(args.dsn, args.name, stopping)

    while not stopping:
        job = db.call(
            "SELECT id, payload, lease_token, attempt_count,"
            "       extract(epoch FROM lease_expires_at - clock_timestamp())::float8"
            "  FROM jq_claim(%s, %s, make_interval(secs => %s), wait => make_interval(secs => %s))",
            (args.queue, args.name, args.lease, args.wait),
        )
        if job is None:
            if args.once_empty and not stopping and db.call(DRAINED, (args.queue,)) == (True,):
                break
            continue
        job_id, payload, token, attempt, length = job
        log(args.name, f"claimed job {job_id} (attempt {attempt}, lease token {token})")
        lease, lost = Lease(args.dsn, args.name, stopping, job_id, token, length), None
        try:
            result = handle(payload, lease)
            if result is None:
                report = ("completed", "SELECT jq_complete(%s, %s, %s)", (job_id, args.name, token))
            else:
                report = ("completed", "SELECT jq_complete(%s, %s, %s, result => %s)",
                          (job_id, args.name, token, Jsonb(result)))
        except LeaseLost as error:
            lost = str(error)
        except BadPayload as error:
            report = failure(job_id, args.name, token, "BAD_PAYLOAD", error, retryable=False)
        except Exception as error:  # anything else may succeed on a later attempt
            report = failure(job_id, args.name, token, type(error).__name__, error, retryable=True)
        finally:
            lease.stop()
        lost = lost or lease.lost
        if lost:
            # Another worker may own the job now: whatever this one did, it reports nothing.
            log(args.name, f"lease lost on job {job_id} (lease token {token}): {lost}, nothing reported")
            continue
        what, sql, params = report
        done = db.call(sql, params, until=lease.until)
        if done is None:
            log(args.name, f"gave up reporting job {job_id} (lease token {token}): it is left to lease expiry")
        elif done[0]:
            log(args.name, f"{what} job {job_id} (lease token {token})")
        else:
            # The lease expired or the job was cancelled: another worker may own it now, and
            # this worker's report was refused. Nothing to undo here.
            log(args.name, f"lease lost on job {job_id} (lease token {token}): the report was refused")


# No pending (claimable now, scheduled, or held until the jobs it depends on have succeeded) and
# no running job. Read from jq_queue_stats, whose row of the queue every right on it shows (guide,
# "Security"): a role with only `consume` may not read jq_jobs.
DRAINED = (
    "SELECT NOT EXISTS (SELECT 1 FROM jq_queue_stats"
    "                    WHERE queue_name = %s AND pending + scheduled + held_by_dependency + running > 0)"
)


def failure(job_id, worker, token, code, error, retryable):
    return (
        "failed",
        "SELECT jq_fail(%s, %s, %s, %s, %s, retryable => %s)",
        (job_id, worker, token, code, str(error), retryable),
    )


class Lease:
    """The lease on the job in hand, renewed by a thread of its own every third of its length until
    stop(). The thread makes its own connection when the first heartbeat is due, so a job shorter
    than that opens none, and closes it at the end."""

    def __init__(self, dsn, worker, stopping, job_id, token, length):
        self.worker, self.job_id, self.token, self.length = worker, job_id, token, length
        # Until when the lease is known to hold (time.monotonic): the claim or the last heartbeat
        # the server confirmed, counted from when it was sent.
        self.until = time.monotonic() + length
        # Why the job is no longer this worker's, once it is not.
        self.lost = None
        self.done = threading.Event()
        self.db = Connection(dsn, worker, stopping)
        threading.Thread(target=self.renew, name=f"heartbeat-{job_id}", daemon=True).start()

    def check(self):
        """Raises LeaseLost once the lease is lost: call it between the steps of long work."""
        if self.lost:
            raise LeaseLost(self.lost)

    def stop(self):
        self.done.set()

    def renew(self):
        interval = max(self.length, 0.03) / 3
        wait = interval
        try:
            while not self.done.wait(wait):
                sent = time.monotonic()
                wait = interval
                try:
                    # Through lost connections for as long as the lease may hold; None after that.
                    params = (self.job_id, self.worker, self.token)
                    renewed = self.db.call("SELECT jq_heartbeat(%s, %s, %s)", params, until=self.until)
                except psycopg.Error as error:  # the server refused the statement: try again soon
                    log(self.worker, f"heartbeat of job {self.job_id} failed: {summary(error)}")
                    renewed, wait = (), interval / 3
                if self.done.is_set():
                    return
                if renewed == (True,):
                    self.until = sent + self.length
                elif renewed == (False,):
                    self.lost = "heartbeat refused"
                    return
                elif time.monotonic() >= self.until:
                    # The lease may have expired, and the job may already run elsewhere.
                    self.lost = "no heartbeat got through for a whole lease"
                    return
        finally:
            self.db.close()


class Connection:
    """One autocommit connection, made anew whenever it is lost."""

    def __init__(self, dsn, name, stopping):
        self.dsn, self.name, self.stopping = dsn, name, stopping
        self.conn = None

    def call(self, sql, params, until=None):
        """The statement's one row (None if it returned none). A lost connection is made anew, with
        a backoff from 0.2 s to 5 s, and the statement sent again: until `until` (a time.monotonic
        deadline) if given, None after it, whether or not the worker stops; otherwise until it gets
        through or the worker stops."""
        backoff = 0.2
        while True:
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=5)
                    if backoff > 0.2:
                        log(self.name, "reconnected")
                return self.conn.execute(sql, params).fetchone()
            except psycopg.OperationalError as error:
                # The server answered with an error of the statement itself: not a lost connection.
                if self.conn is not None and not self.conn.closed and error.sqlstate:
                    raise
                log(self.name, f"connection lost: {summary(error)}")
                self.conn = None
                if until is None:
                    if self.stopping:
                        return None
                elif time.monotonic() + backoff >= until:
                    return None
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    def close(self):
        if self.conn is not None:
            self.conn.close()


def summary(error):
    """The first line of an error's message."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def log(worker, message):
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    print(f"{now} {worker}: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
