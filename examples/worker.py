#!/usr/bin/env python3
"""A pg_jobqueue worker in Python with psycopg 3: claim, work, report.

    python3 examples/worker.py --dsn "host=... dbname=..." --queue emails

Every call runs in autocommit, so each claim, completion and failure commits at once and a job is
held by its lease, never by an open transaction. The waiting claim sleeps in the server until a job
arrives (or `--wait` passes), so an idle worker costs the database almost nothing.
"""
import argparse
import os
import signal
import socket
import sys

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
    parser.add_argument("--once-empty", action="store_true", help="exit when the queue has no live jobs")
    args = parser.parse_args()

    worker = f"{socket.gethostname()}-{os.getpid()}"
    stopping = []
    # SIGTERM: finish the job in hand, then stop claiming. A waiting claim is at most --wait long.
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))

    with psycopg.connect(args.dsn, autocommit=True) as conn:
        while not stopping:
            job = conn.execute(
                "SELECT id, payload, lease_token FROM jq_claim(%s, %s, wait => make_interval(secs => %s))",
                (args.queue, worker, args.wait),
            ).fetchone()
            if job is None:
                if args.once_empty and queue_is_drained(conn, args.queue):
                    break
                continue
            job_id, payload, token = job
            try:
                handle(payload)
                done = conn.execute("SELECT jq_complete(%s, %s, %s)", (job_id, worker, token)).fetchone()[0]
            except BadPayload as error:
                done = fail(conn, job_id, worker, token, "BAD_PAYLOAD", error, retryable=False)
            except Exception as error:  # anything else may succeed on a later attempt
                done = fail(conn, job_id, worker, token, type(error).__name__, error, retryable=True)
            if not done:
                # The lease expired or the job was cancelled: another worker may own it now, and
                # this worker's report was refused. Nothing to undo here.
                print(f"job {job_id}: lease lost, report refused", file=sys.stderr)


def fail(conn, job_id, worker, token, code, error, retryable):
    return conn.execute(
        "SELECT jq_fail(%s, %s, %s, %s, %s, retryable => %s)",
        (job_id, worker, token, code, str(error), retryable),
    ).fetchone()[0]


def queue_is_drained(conn, queue):
    return conn.execute(
        "SELECT NOT EXISTS (SELECT 1 FROM jq_jobs WHERE queue_name = %s AND status IN ('pending', 'running'))",
        (queue,),
    ).fetchone()[0]


if __name__ == "__main__":
    main()
