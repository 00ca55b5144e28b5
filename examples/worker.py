#!/usr/bin/env python3
"""A pg_jobqueue worker in Python with psycopg 3: claim, work, report.

    python3 examples/worker.py --dsn "host=... dbname=..." --queue emails

Every call runs in autocommit, so each claim, completion and failure commits at once and a job is
held by its lease, never by an open transaction. The waiting claim sleeps in the server until a job
arrives (or `--wait` passes), so an idle worker costs the database almost nothing.

A lost connection (a server restart, a failover) is made anew, and a report that did not get
through is sent again on the new connection while the lease may still hold. With a primary and its
standbys in the connection string, the worker follows a failover to whichever server takes writes:

    --dsn "host=db1,db2 dbname=app target_session_attrs=read-write"

Each claim and report is logged on stderr, one line each, as jq-worker logs them.
"""
import argparse
import os
import signal
import socket
import sys
import time
from datetime import datetime, timezone

import psycopg


class BadPayload(Exception):
    """The payload will not improve: fail without retrying."""


def handle(payload):
    """Your work goes here. It must be safe to run twice: delivery is at least once, so an effect
    outside the database should use the job id as its idempotency key."""
    if "to" not in payload:
        raise BadPayload("payload has no 'to'")
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
        job_id, payload, token, attempt, lease = job
        log(args.name, f"claimed job {job_id} (attempt {attempt}, lease token {token})")
        lease_until = time.monotonic() + lease
        try:
            handle(payload)
            report = ("completed", "SELECT jq_complete(%s, %s, %s)", (job_id, args.name, token))
        except BadPayload as error:
            report = failure(job_id, args.name, token, "BAD_PAYLOAD", error, retryable=False)
        except Exception as error:  # anything else may succeed on a later attempt
            report = failure(job_id, args.name, token, type(error).__name__, error, retryable=True)
        what, sql, params = report
        done = db.call(sql, params, until=lease_until)
        if done is None:
            log(args.name, f"gave up reporting job {job_id} (lease token {token}): it is left to lease expiry")
        elif done[0]:
            log(args.name, f"{what} job {job_id} (lease token {token})")
        else:
            # The lease expired or the job was cancelled: another worker may own it now, and
            # this worker's report was refused. Nothing to undo here.
            log(args.name, f"lease lost on job {job_id} (lease token {token}): the report was refused")


DRAINED = "SELECT NOT EXISTS (SELECT 1 FROM jq_jobs WHERE queue_name = %s AND status IN ('pending', 'running'))"


def failure(job_id, worker, token, code, error, retryable):
    return (
        "failed",
        "SELECT jq_fail(%s, %s, %s, %s, %s, retryable => %s)",
        (job_id, worker, token, code, str(error), retryable),
    )


class Connection:
    """One autocommit connection, made anew whenever it is lost."""

    def __init__(self, dsn, name, stopping):
        self.dsn, self.name, self.stopping = dsn, name, stopping
        self.conn = None

    def call(self, sql, params, until=None):
        """The statement's one row (None if it returned none). A lost connection is made anew, with
        a backoff from 0.2 s to 5 s, and the statement sent again: until `until` (a time.monotonic
        deadline) if given, None after it; otherwise until it gets through or the worker stops."""
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
                log(self.name, f"connection lost: {str(error).strip().splitlines()[0]}")
                self.conn = None
                if self.stopping or (until is not None and time.monotonic() + backoff >= until):
                    return None
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)


def log(worker, message):
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    print(f"{now} {worker}: {message}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
