-- pg_jobqueue_router 0.3.0 -> 0.4.0: workflows through the router (guide, "Workflows" and "Scaling
-- out"). jq_enqueue and jq_enqueue_batch take depends_on last, and send it only to the node that
-- holds every job it names; jq_parent_results and jq_purge go to the node of their job. Run by ALTER EXTENSION
-- pg_jobqueue_router UPDATE once the nodes run pg_jobqueue 0.4.0: an enqueue without depends_on makes
-- the same call as before, so the router can also be updated first. Every object it makes is as
-- pg_jobqueue_router--0.4.0.sql makes it, and whoever could call a function of 0.3.0 can call what
-- stands for it now (tests/harness/tests/router.rs compares both).
\echo Use "ALTER EXTENSION pg_jobqueue_router UPDATE" to load this file. \quit

-- The PL/Proxy functions of 0.4.0, made as the install script makes them (see there).
DO $$
DECLARE
    f text[];
BEGIN
    FOREACH f SLICE 1 IN ARRAY ARRAY[
        ['jq_parent_results(job_id bigint) RETURNS TABLE (job_id bigint, status jq_status, result jsonb)', NULL],
        ['jq_purge(job_id bigint) RETURNS boolean', NULL],
        ['jq_router_enqueue_after_on(node int, queue_name text, payload jsonb, priority int, run_at timestamptz, '
         'max_attempts int, dedup_key text, ordering_key text, concurrency_key text, expires_at timestamptz, '
         'depends_on bigint[]) RETURNS bigint',
         'jq_enqueue(queue_name, payload, priority, run_at, max_attempts, dedup_key, ordering_key, concurrency_key, '
         'expires_at, depends_on)'],
        ['jq_router_enqueue_batch_after_on(node int, queue_name text, payloads jsonb[], priority int, '
         'run_at timestamptz, max_attempts int, concurrency_key text, expires_at timestamptz, depends_on bigint[]) '
         'RETURNS SETOF bigint',
         'jq_enqueue_batch(queue_name, payloads, priority, run_at, max_attempts, concurrency_key, expires_at, '
         'depends_on)']
    ] LOOP
        EXECUTE pg_catalog.format(
            'CREATE FUNCTION @extschema@.%s LANGUAGE plproxy SET search_path = pg_catalog, @extschema@, pg_temp '
            'AS $proxy$ CLUSTER ''pg_jobqueue''; %s $proxy$',
            f[1],
            CASE WHEN f[2] IS NULL THEN 'RUN ON @extschema@.jq_router_node_of(job_id);'
                 ELSE pg_catalog.format('RUN ON node; SELECT * FROM @extschema@.%s;', f[2]) END);
    END LOOP;
END
$$;

-- The node an enqueue with `depends_on` goes to, as PL/Proxy maps `route` (the number the rules
-- above give the job) to a node; with no route (a job without keys in a spread queue, which any
-- node would take), the node of its first dependency. A job waits on its node for completions made
-- there (guide, "Workflows"): one that named a job of another node would never be released, so every
-- job depends_on names must be on that node, or the enqueue is refused (0A000) before any node is
-- called. NULL elements are left to the node, which refuses them naming depends_on; NULL when no
-- element names a node and no route is given.
CREATE FUNCTION jq_router_node_after(depends_on bigint[], route int) RETURNS int
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    nodes int := @extschema@.jq_router_nodes();
    target int := pg_catalog.abs(route OPERATOR(pg_catalog.%) nodes);
    named bigint;  -- the dependency that chose the node, when no route did
    dependency bigint;
    node int;
BEGIN
    FOREACH dependency IN ARRAY depends_on LOOP
        CONTINUE WHEN dependency IS NULL;
        -- As PL/Proxy maps the node that issued an id for the calls about its job (jq_router_node_of).
        node := pg_catalog.abs(@extschema@.jq_router_node_of(dependency) OPERATOR(pg_catalog.%) nodes);
        IF target IS NULL THEN
            target := node;
            named := dependency;
        ELSIF node OPERATOR(pg_catalog.<>) target AND named IS NULL THEN
            RAISE EXCEPTION 'depends_on names job %, which is on node %, but this job goes to node %',
                dependency, node, target
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'A job can depend only on jobs of the node it goes to (guide, "Scaling out").';
        ELSIF node OPERATOR(pg_catalog.<>) target THEN
            RAISE EXCEPTION 'depends_on names job % on node % and job % on node %', named, target, dependency, node
                USING ERRCODE = 'feature_not_supported',
                      HINT = 'A job can depend only on jobs of the node it goes to (guide, "Scaling out").';
        END IF;
    END LOOP;
    RETURN target;
END
$$;

-- pg_jobqueue's functions that choose a node, with its signatures: made beside those of 0.3.0, which
-- are dropped below once their grants are copied.

CREATE FUNCTION jq_enqueue(queue_name text, payload jsonb, priority int DEFAULT 0, run_at timestamptz DEFAULT NULL,
                           max_attempts int DEFAULT NULL, dedup_key text DEFAULT NULL,
                           ordering_key text DEFAULT NULL, concurrency_key text DEFAULT NULL,
                           expires_at timestamptz DEFAULT NULL, depends_on bigint[] DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    spread boolean := @extschema@.jq_router_is_spread(queue_name);
    -- Jobs that share a key share a node, so that the node keeps their order, limit and dedup.
    route_key text := COALESCE(ordering_key, concurrency_key, dedup_key);
    route int;
BEGIN
    IF NOT spread OR route_key IS NOT NULL THEN
        route := COALESCE(pg_catalog.hashtext(CASE WHEN spread THEN route_key ELSE queue_name END), 0);
    END IF;
    IF pg_catalog.cardinality(depends_on) OPERATOR(pg_catalog.>) 0 THEN
        -- No fallback to another node: the dependencies are on this one. With only NULLs named and
        -- no route, any node refuses them.
        RETURN @extschema@.jq_router_enqueue_after_on(
            COALESCE(@extschema@.jq_router_node_after(depends_on, route),
                     pg_catalog.floor(pg_catalog.random() OPERATOR(pg_catalog.*) 1073741824)::int),
            queue_name, payload, priority, run_at, max_attempts, dedup_key, ordering_key, concurrency_key, expires_at,
            depends_on);
    END IF;
    IF route IS NULL THEN
        RETURN (SELECT * FROM @extschema@.jq_router_enqueue_anywhere(queue_name, false, payload, NULL, priority,
                                                                     run_at, max_attempts, expires_at));
    END IF;
    RETURN @extschema@.jq_router_enqueue_on(
        route, queue_name, payload, priority, run_at, max_attempts, dedup_key, ordering_key, concurrency_key, expires_at);
END
$$;

-- A batch goes whole to one node, which keeps the ids in input order.
CREATE FUNCTION jq_enqueue_batch(queue_name text, payloads jsonb[], priority int DEFAULT 0,
                                 run_at timestamptz DEFAULT NULL, max_attempts int DEFAULT NULL,
                                 concurrency_key text DEFAULT NULL, expires_at timestamptz DEFAULT NULL,
                                 depends_on bigint[] DEFAULT NULL)
RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    spread boolean := @extschema@.jq_router_is_spread(queue_name);
    route int;
BEGIN
    IF NOT spread OR concurrency_key IS NOT NULL THEN
        route := COALESCE(pg_catalog.hashtext(CASE WHEN spread THEN concurrency_key ELSE queue_name END), 0);
    END IF;
    IF pg_catalog.cardinality(depends_on) OPERATOR(pg_catalog.>) 0 THEN
        RETURN QUERY SELECT * FROM @extschema@.jq_router_enqueue_batch_after_on(
            COALESCE(@extschema@.jq_router_node_after(depends_on, route),
                     pg_catalog.floor(pg_catalog.random() OPERATOR(pg_catalog.*) 1073741824)::int),
            queue_name, payloads, priority, run_at, max_attempts, concurrency_key, expires_at, depends_on);
    ELSIF route IS NULL THEN
        RETURN QUERY SELECT * FROM @extschema@.jq_router_enqueue_anywhere(queue_name, true, NULL, payloads, priority,
                                                                          run_at, max_attempts, expires_at);
    ELSE
        RETURN QUERY SELECT * FROM @extschema@.jq_router_enqueue_batch_on(
            route, queue_name, payloads, priority, run_at, max_attempts, concurrency_key, expires_at);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION jq_router_enqueue_after_on, jq_router_enqueue_batch_after_on, jq_router_node_after,
                       jq_enqueue(text, jsonb, int, timestamptz, int, text, text, text, timestamptz, bigint[]),
                       jq_enqueue_batch(text, jsonb[], int, timestamptz, int, text, timestamptz, bigint[]),
                       jq_parent_results, jq_purge
FROM PUBLIC;

-- Who may call each new function: whoever may call the function of 0.3.0 it replaces or goes with
-- (the DBA granted them, guide "Scaling out"): the enqueues' own, the enqueue's call to a node, the
-- look-up of the nodes, jq_result's, the other read of one job's outcome, and jq_cancel's, the
-- other operator's verb on one job.
DO $$
DECLARE
    granted record;
BEGIN
    FOR granted IN
        SELECT f.made, a.grantee, a.is_grantable
        FROM (VALUES
            ('@extschema@.jq_enqueue(text, jsonb, int, timestamptz, int, text, text, text, timestamptz)',
             '@extschema@.jq_enqueue(text, jsonb, int, timestamptz, int, text, text, text, timestamptz, bigint[])'),
            ('@extschema@.jq_enqueue_batch(text, jsonb[], int, timestamptz, int, text, timestamptz)',
             '@extschema@.jq_enqueue_batch(text, jsonb[], int, timestamptz, int, text, timestamptz, bigint[])'),
            ('@extschema@.jq_router_enqueue_on(int, text, jsonb, int, timestamptz, int, text, text, text, timestamptz)',
             '@extschema@.jq_router_enqueue_after_on(int, text, jsonb, int, timestamptz, int, text, text, text, '
             'timestamptz, bigint[])'),
            ('@extschema@.jq_router_enqueue_batch_on(int, text, jsonb[], int, timestamptz, int, text, timestamptz)',
             '@extschema@.jq_router_enqueue_batch_after_on(int, text, jsonb[], int, timestamptz, int, text, '
             'timestamptz, bigint[])'),
            ('@extschema@.jq_router_nodes()', '@extschema@.jq_router_node_after(bigint[], int)'),
            ('@extschema@.jq_result(bigint)', '@extschema@.jq_parent_results(bigint)'),
            ('@extschema@.jq_cancel(bigint)', '@extschema@.jq_purge(bigint)')
        ) AS f(was, made)
        JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) f.was::pg_catalog.regprocedure::pg_catalog.oid
        CROSS JOIN LATERAL pg_catalog.aclexplode(p.proacl) a
        WHERE a.grantee OPERATOR(pg_catalog.<>) p.proowner
    LOOP
        EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', granted.made,
            CASE WHEN granted.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
                 ELSE granted.grantee::pg_catalog.regrole::pg_catalog.text END,
            CASE WHEN granted.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$$;

-- PostgreSQL records what the grants of an extension script leave as the functions' initial
-- privileges (pg_init_privs), and pg_dump leaves those out as the extension's own: the grants just
-- copied would be lost by a dump and restore. A fresh install's are the owner's alone, as here.
UPDATE pg_catalog.pg_init_privs i
SET initprivs = ARRAY(
        SELECT u.item FROM pg_catalog.unnest(i.initprivs) WITH ORDINALITY AS u(item, n)
        WHERE EXISTS (SELECT FROM pg_catalog.aclexplode(ARRAY[u.item]) a
                      WHERE a.grantee OPERATOR(pg_catalog.=) a.grantor)
        ORDER BY u.n)
WHERE i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
  AND i.objsubid OPERATOR(pg_catalog.=) 0
  AND i.privtype OPERATOR(pg_catalog.=) 'e'
  AND i.objoid OPERATOR(pg_catalog.=) ANY (ARRAY[
      '@extschema@.jq_enqueue(text, jsonb, int, timestamptz, int, text, text, text, timestamptz, bigint[])',
      '@extschema@.jq_enqueue_batch(text, jsonb[], int, timestamptz, int, text, timestamptz, bigint[])',
      '@extschema@.jq_router_enqueue_after_on(int, text, jsonb, int, timestamptz, int, text, text, text, timestamptz, '
      'bigint[])',
      '@extschema@.jq_router_enqueue_batch_after_on(int, text, jsonb[], int, timestamptz, int, text, timestamptz, '
      'bigint[])',
      '@extschema@.jq_router_node_after(bigint[], int)',
      '@extschema@.jq_parent_results(bigint)',
      '@extschema@.jq_purge(bigint)'
  ]::pg_catalog.regprocedure[]::pg_catalog.oid[]);

DROP FUNCTION jq_enqueue(text, jsonb, int, timestamptz, int, text, text, text, timestamptz);
DROP FUNCTION jq_enqueue_batch(text, jsonb[], int, timestamptz, int, text, timestamptz);
