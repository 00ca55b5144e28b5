-- W13: W3 on a DAG of :fill jobs (guide, "Workflows"), in units of 102: one job, 100 jobs that
-- depend on it (fan-out), and one job that depends on those 100 (fan-in). Only the first job of
-- each unit is claimable at the start; the rest become claimable as the run completes their
-- dependencies. psql does not write :fill into a DO block, so it comes through a setting.
SELECT set_config('bench.fill', :'fill', false);
DO $$
DECLARE
    unit int;
    root bigint;
    fanned bigint[];
BEGIN
    FOR unit IN 1 .. current_setting('bench.fill')::int / 102 LOOP
        root := jq_enqueue('bench', jsonb_build_object('n', unit));
        fanned := ARRAY(SELECT jq_enqueue_batch('bench', array_fill(jsonb_build_object('n', unit), ARRAY[100]),
                                                depends_on => ARRAY[root]));
        PERFORM jq_enqueue('bench', jsonb_build_object('n', unit), depends_on => fanned);
    END LOOP;
END
$$;
