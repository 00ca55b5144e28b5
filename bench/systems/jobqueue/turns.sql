-- The procedure of bench/dag_cost.sh and bench/key_cost.sh: one session claims and completes a job
-- of the queue `side`, commits, does the same for `plainq`, and so on until `side` is empty,
-- adding up the time of each; one row of bench_turns per round. The two sides take turns job by
-- job, so whatever slows the machine slows both alike.
CREATE TABLE bench_turns (round int, jobs int, side_us float8, plain_us float8);
CREATE PROCEDURE bench_drain(round int, side text) LANGUAGE plpgsql AS $$
DECLARE
    job bigint;
    token bigint;
    jobs int := 0;
    started timestamptz;
    between timestamptz;
    side_time interval := '0';
    plain interval := '0';
BEGIN
    LOOP
        started := clock_timestamp();
        SELECT id, lease_token INTO job, token FROM jq_claim(side, 'w');
        EXIT WHEN job IS NULL;
        PERFORM jq_complete(job, 'w', token);
        COMMIT;
        between := clock_timestamp();
        SELECT id, lease_token INTO job, token FROM jq_claim('plainq', 'w');
        PERFORM jq_complete(job, 'w', token);
        COMMIT;
        side_time := side_time + (between - started);
        plain := plain + (clock_timestamp() - between);
        jobs := jobs + 1;
    END LOOP;
    INSERT INTO bench_turns
    VALUES (round, jobs, extract(epoch FROM side_time) * 1e6 / jobs, extract(epoch FROM plain) * 1e6 / jobs);
END
$$;
