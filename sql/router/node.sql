-- Makes this server node K of a pg_jobqueue router (guide, "Scaling out"): its job ids become
-- K * 2^48 + 1 to (K + 1) * 2^48 - 1, so that the router sends every call about a job to the server
-- that holds it, by the id alone (id >> 48). K is the server's partition number on the router (p0,
-- p1, ...). Run it once on each server, as a superuser, in the database of pg_jobqueue, before the
-- first enqueue through the router:
--
--     psql -v node=K -d app -f sql/router/node.sql
--
-- It moves the id sequence (jq_jobs_id_seq) up to the range only when it is below it, so running it
-- again changes nothing. It refuses a server that already issued an id past its range, or that
-- holds jobs outside it: the router would look for them on another server. (A server that ran alone
-- before becomes node 0 as it is: its ids are already in the range of node 0.)
\set ON_ERROR_STOP on
\if :{?node}
\else
  \echo 'usage: psql -v node=K -d DATABASE -f sql/router/node.sql'
\endif
SET pg_jobqueue_router.node = :'node';

DO $$
DECLARE
    node bigint := pg_catalog.current_setting('pg_jobqueue_router.node');
    range_size constant bigint := 281474976710656;  -- 2^48
    sequence regclass;
    jobs regclass;
    last_id bigint;
BEGIN
    IF node < 0 OR node > 32767 THEN
        RAISE EXCEPTION 'node must be 0 to 32767, not %', node USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT pg_catalog.format('%I.jq_jobs_id_seq', n.nspname)::regclass, pg_catalog.format('%I.jq_jobs', n.nspname)::regclass
    INTO sequence, jobs
    FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
    WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue';
    IF sequence IS NULL THEN
        RAISE EXCEPTION 'pg_jobqueue is not installed in database %', pg_catalog.current_database()
            USING ERRCODE = 'undefined_object';
    END IF;
    EXECUTE pg_catalog.format('SELECT last_value FROM %s', sequence) INTO last_id;
    IF last_id OPERATOR(pg_catalog.>=) (node + 1) * range_size THEN
        RAISE EXCEPTION 'this server already issued job id %, past the range of node %', last_id, node
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE pg_catalog.format('SELECT max(id) FROM %s WHERE id OPERATOR(pg_catalog.>>) 48 OPERATOR(pg_catalog.<>) $1', jobs)
        INTO last_id USING node::int;
    IF last_id IS NOT NULL THEN
        RAISE EXCEPTION 'this server holds jobs outside the ids of node % (job %, for one)', node, last_id
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    EXECUTE pg_catalog.format('SELECT last_value FROM %s', sequence) INTO last_id;
    IF last_id OPERATOR(pg_catalog.<=) node * range_size THEN
        PERFORM pg_catalog.setval(sequence, node * range_size);  -- the next id is node * 2^48 + 1
    END IF;
    RAISE NOTICE 'this server is node %: its next job id is above %', node, node * range_size;
END
$$;
