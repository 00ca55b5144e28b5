-- A complete worker loop in plain SQL: any client in any language can follow the same steps.
-- Run several at once, each in a session of its own, as the test the_plain_sql_example_worker_drains_a_queue
-- (tests/harness/tests/clients.rs) does with two. Each step commits at once: a job is held by its
-- lease, never by an open transaction.
CREATE PROCEDURE demo_worker(queue text, worker text, lease interval, work_ms int)
LANGUAGE plpgsql AS $$
DECLARE
    job record;
BEGIN
    LOOP
        -- 1. Claim. The claim is its own short transaction; the lease and token are the receipt.
        SELECT * INTO job FROM jq_claim(queue, worker, lease);
        COMMIT;
        IF job.id IS NULL THEN
            -- Nothing claimable. Stop once nothing is pending or running either; otherwise poll.
            EXIT WHEN NOT EXISTS (SELECT 1 FROM jq_jobs
                                  WHERE queue_name = queue AND status IN ('pending', 'running'));
            PERFORM pg_sleep(0.05);
            CONTINUE;
        END IF;

        -- 2. Work. A long job would call jq_heartbeat(job.id, worker, job.lease_token) now and then.
        PERFORM pg_sleep(work_ms / 1000.0);

        -- 3. Report, with the token from the claim. Both return false if the lease was lost.
        IF (job.payload->>'n')::int % 97 = 0 AND job.attempt_count = 1 THEN
            PERFORM jq_fail(job.id, worker, job.lease_token, 'FLAKY', 'a transient error, retried',
                            retry_in => interval '200 milliseconds');
        ELSE
            PERFORM jq_complete(job.id, worker, job.lease_token);
        END IF;
        COMMIT;
    END LOOP;
END
$$;
