#!/usr/bin/env python3
"""A pipeline of jobs that wait for each other (the guide, "Workflows"): one `fetch` job, then one
`transform` job per region that depends on it (fan-out), then one `merge` job that depends on every
transform (fan-in). Each step reads what the jobs it depends on returned with jq_parent_results, and
returns its own result, which the next step reads in turn.

    python3 examples/pipeline.py enqueue --dsn DSN
        enqueues one run of the pipeline, all of it in one transaction, and prints the merge
        job's id (`SELECT * FROM jq_await(id, interval '1 minute')` waits for the total)

    jq-worker --dsn DSN --queue STEP -- python3 examples/pipeline.py run STEP --dsn DSN
        one job of STEP (fetch, transform or merge) as jq-worker's command: the payload on stdin,
        the job's id in JQ_JOB_ID, the result on stdout

    python3 examples/pipeline.py work STEP --dsn DSN [flags of examples/worker.py]
        the Python example worker (examples/worker.py) on STEP's queue, with the step as its handle

Every step's queue needs a worker: a job waits, held, until the jobs it depends on have succeeded,
and is claimed from its own queue then. The steps are deterministic, so a step that runs twice
(delivery is at least once) returns the same result.
"""
import argparse
import json
import os
import sys

import psycopg
from psycopg.types.json import Jsonb

# The regions of the sales export: one transform job each.
REGIONS = ["north", "south", "east"]

# What the fetch step downloads, here a fixed export: (region, amount) per sale.
EXPORT = [["north", 120], ["south", 80], ["north", 300], ["east", 50], ["south", 40], ["east", 210]]


def fetch(payload, inputs):
    """Downloads the export (here: returns the fixed one). Its result is every transform's input."""
    return {"rows": EXPORT}


def transform(payload, inputs):
    """Adds up one region's sales, from the rows the fetch job returned."""
    (fetched,) = inputs
    region = payload["region"]
    return {"region": region, "total": sum(amount for where, amount in fetched["rows"] if where == region)}


def merge(payload, inputs):
    """Adds up the regions' totals: `inputs` are the transforms' results, in the order the merge job
    named them in depends_on."""
    return {
        "total": sum(part["total"] for part in inputs),
        "regions": {part["region"]: part["total"] for part in inputs},
    }


STEPS = {"fetch": fetch, "transform": transform, "merge": merge}


def inputs(dsn, job_id):
    """The results of the jobs `job_id` depends on, in the order it named them. A job is claimable
    only once all of them have succeeded, so each has its result."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute("SELECT job_id, status, result FROM jq_parent_results(%s)", (job_id,)).fetchall()
    for parent, status, _ in rows:
        if status != "succeeded":
            raise RuntimeError(f"job {parent}, which job {job_id} depends on, is {status}")
    return [result for _, _, result in rows]


def enqueue(dsn):
    """One run: the fetch job, a transform per region depending on it, and the merge job depending
    on every transform, enqueued in one transaction, so that no worker sees half of it. Returns the
    merge job's id."""
    with psycopg.connect(dsn) as conn:  # commits at the end of the block
        fetch_id = conn.execute("SELECT jq_enqueue('fetch', %s)", (Jsonb({"export": "sales"}),)).fetchone()[0]
        transforms = [
            job
            for (job,) in conn.execute(
                "SELECT * FROM jq_enqueue_batch('transform', %s::jsonb[], depends_on => %s::bigint[])",
                ([Jsonb({"region": region}) for region in REGIONS], [fetch_id]),
            )
        ]
        return conn.execute(
            "SELECT jq_enqueue('merge', %s, depends_on => %s::bigint[])", (Jsonb({"export": "sales"}), transforms)
        ).fetchone()[0]


def run(step, dsn):
    """One job, as jq-worker runs it: exit 0 completes the job with stdout as its result; an
    exception exits 1, which fails the job for a retry."""
    payload = json.load(sys.stdin)
    result = STEPS[step](payload, inputs(dsn, int(os.environ["JQ_JOB_ID"])))
    print(json.dumps(result))


def work(step, dsn, flags):
    """examples/worker.py on the step's queue, with the step as its handle."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import worker

    def handle(payload, lease):
        result = STEPS[step](payload, inputs(dsn, lease.job_id))
        lease.check()
        return result

    worker.handle = handle
    sys.argv = [sys.argv[0], "--dsn", dsn, "--queue", step, *flags]
    worker.main()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["enqueue", "run", "work"])
    parser.add_argument("step", nargs="?", choices=sorted(STEPS))
    parser.add_argument("--dsn", required=True)
    args, flags = parser.parse_known_args()
    if args.command != "enqueue" and args.step is None:
        parser.error(f"{args.command} needs a step: {', '.join(STEPS)}")
    if args.command == "enqueue":
        print(enqueue(args.dsn))
    elif args.command == "run":
        run(args.step, args.dsn)
    else:
        work(args.step, args.dsn, flags)


if __name__ == "__main__":
    main()
