-- pg_jobqueue_router 0.4.0: the jq_* functions of pg_jobqueue in a router database. Each call goes
-- with PL/Proxy to one of the servers that run pg_jobqueue (guide, "Scaling out"). Workers and
-- producers call the router exactly as they would call one server.
--
-- Setup, in the router database, as a superuser:
--
--   CREATE EXTENSION plproxy;
--   CREATE SERVER pg_jobqueue FOREIGN DATA WRAPPER plproxy OPTIONS (
--       modular_mapping '1',                                  -- any number of servers, not only 2^k
--       p0 'host=db0 port=5432 dbname=app connect_timeout=2',  -- node 0
--       p1 'host=db1 port=5432 dbname=app connect_timeout=2',  -- node 1
--       p2 'host=db2 port=5432 dbname=app connect_timeout=2'); -- node 2
--   CREATE USER MAPPING FOR PUBLIC SERVER pg_jobqueue;        -- no user: each caller connects as itself
--   CREATE SCHEMA jobqueue;                                   -- named as pg_jobqueue's schema on the servers
--   CREATE EXTENSION pg_jobqueue_router SCHEMA jobqueue;
--   GRANT USAGE ON SCHEMA jobqueue TO app;
--   GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA jobqueue TO app;
--   GRANT USAGE ON FOREIGN SERVER pg_jobqueue TO app;
--
-- and on each server pK, once, before anything is enqueued through the router:
--   psql -v node=K -d app -f sql/router/node.sql
--
-- How a call is routed:
--   * by its job id: node k issues the ids k * 2^48 + 1 to (k + 1) * 2^48 - 1 (node.sql), so every
--     call about one job (jq_heartbeat, jq_complete, jq_fail, ...) goes to node `job_id >> 48`;
--   * by its queue: a queue lives on node abs(hashtext(queue_name) % n), unless it is spread over
--     every node (jq_router_spread). On a spread queue, a job with an ordering, concurrency or dedup
--     key goes to the node of the first of these keys, so that per-key order, limits and dedup stay
--     on one server; a job without keys goes to any node that answers; a claim asks the nodes in
--     turn;
--   * by its dependencies: a job enqueued with depends_on waits on its node for jobs of that node,
--     whose completions release it (guide, "Workflows"), so every job it names must be on the node
--     the rules above send it to, or it is refused (0A000) and nothing is written. On a spread queue
--     a job without keys goes to the node of its dependencies.
--
-- Rights. The servers decide everything: PL/Proxy connects to them as the calling role (the user
-- mapping names no user), so their per-queue rights (jq_grant) apply unchanged and a call without
-- them fails with their 42501. The router adds one door in front: EXECUTE on its functions is
-- revoked from PUBLIC, and the DBA grants it, with USAGE on the foreign server, to the roles that
-- may use the router (above). jq_router_spread writes a table only the owner may write, so granting
-- every function of the schema gives no one the right to move queues.
--
-- Transactions. PL/Proxy runs each call on its server in a transaction of its own that commits at
-- once, as a direct call in autocommit does. A claim is therefore committed on its server when the
-- router returns it; if the router's transaction then fails, the job is held by its lease and comes
-- back after the lease expires, as the job of any lost worker does.
--
-- Every function pins its search_path (pg_catalog first) and names pg_catalog's functions, so that
-- nothing created by another role runs inside it. The calls sent to the servers name this schema,
-- and run there with pg_jobqueue's own pinned paths.
\echo Use "CREATE EXTENSION pg_jobqueue_router" to load this file. \quit

-- As on the servers, so that jq_result and jq_await return the same type.
CREATE TYPE jq_status AS ENUM ('pending', 'running', 'succeeded', 'dead', 'cancelled');

-- The queues spread over every node; any other queue lives on the node its name hashes to.
CREATE TABLE jq_router_spread_queues (
    queue_name text PRIMARY KEY CONSTRAINT jq_router_spread_queues_name_valid
                                CHECK (queue_name ~ '^[A-Za-z0-9_.:-]{1,60}$')
);
SELECT pg_catalog.pg_extension_config_dump('jq_router_spread_queues', '');

-- Spreads a queue over every node, or (spread => false) places it back on the node of its name.
-- Spreading is safe at any time: claims then ask every node, its own included. Placing a queue back
-- leaves the jobs that other nodes hold unclaimed, and either change moves the jobs of a key to
-- another node, where they are ordered and limited apart from the jobs already enqueued: change it
-- while the queue is empty (guide, "Scaling out").
CREATE FUNCTION jq_router_spread(queue_name text, spread boolean DEFAULT true) RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    IF jq_router_spread.queue_name IS NULL THEN
        RAISE EXCEPTION 'queue_name must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    ELSIF jq_router_spread.spread IS NULL THEN
        RAISE EXCEPTION 'spread must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    ELSIF jq_router_spread.queue_name OPERATOR(pg_catalog.!~) '^[A-Za-z0-9_.:-]{1,60}$' THEN
        RAISE EXCEPTION 'queue_name must be 1 to 60 ASCII letters, digits or _ - . :'
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF jq_router_spread.spread THEN
        INSERT INTO @extschema@.jq_router_spread_queues VALUES (jq_router_spread.queue_name) ON CONFLICT DO NOTHING;
    ELSE
        DELETE FROM @extschema@.jq_router_spread_queues q
        WHERE q.queue_name OPERATOR(pg_catalog.=) jq_router_spread.queue_name;
    END IF;
END
$$;

-- Whether a queue is spread. SECURITY DEFINER so that callers need no right on the table; it runs
-- no PL/Proxy call, so the servers still see the caller. PL/pgSQL, like the other functions called
-- on every call, as it keeps its plan for the session.
CREATE FUNCTION jq_router_is_spread(queue_name text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    RETURN EXISTS (SELECT FROM @extschema@.jq_router_spread_queues q
                   WHERE q.queue_name OPERATOR(pg_catalog.=) jq_router_is_spread.queue_name);
END
$$;

-- The number of nodes: the partitions p0, p1, ... of the foreign server pg_jobqueue.
CREATE FUNCTION jq_router_nodes() RETURNS int
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    nodes int;
BEGIN
    SELECT pg_catalog.count(*) INTO nodes
    FROM pg_catalog.pg_foreign_server s, pg_catalog.pg_options_to_table(s.srvoptions) o
    WHERE s.srvname OPERATOR(pg_catalog.=) 'pg_jobqueue'
      AND o.option_name OPERATOR(pg_catalog.~) '^(p|partition_)[0-9]+$';
    IF nodes OPERATOR(pg_catalog.=) 0 THEN
        RAISE EXCEPTION 'the router has no nodes: the foreign server pg_jobqueue is missing or names no partition'
            USING ERRCODE = 'undefined_object', HINT = 'See the README of pg_jobqueue, "Scaling out".';
    END IF;
    RETURN nodes;
END
$$;

-- The node that holds a job, by the range of its id (a NULL id: node 0, which refuses it). PL/Proxy
-- maps a number to the partition abs(number % nodes), so an id that no node issued finds a node
-- that does not know it, and the guarded functions return false as for any unknown id.
CREATE FUNCTION jq_router_node_of(job_id bigint) RETURNS int
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
BEGIN
    RETURN COALESCE((job_id OPERATOR(pg_catalog.>>) 48)::int, 0);
END
$$;

-- Whether an error from a call means that its node could not be reached, rather than that the node
-- refused the call: PL/Proxy's own errors (a refused or broken connection) are XX000, a node that
-- shuts down ends its sessions with 57P01 to 57P03, and connection errors are class 08. A node's
-- refusals keep their own SQLSTATE through PL/Proxy.
CREATE FUNCTION jq_router_unreachable(sqlstate text) RETURNS boolean
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
    SELECT $1 OPERATOR(pg_catalog.=) ANY (ARRAY['XX000', '57P01', '57P02', '57P03'])
        OR pg_catalog.left($1, 2) OPERATOR(pg_catalog.=) '08'
$$;

-- The PL/Proxy functions, each of which sends one call of pg_jobqueue to one node: the signature,
-- and the call sent. Those with no call listed are pg_jobqueue's functions about one job, with its
-- signatures: PL/Proxy sends the same call, with every argument, to the node of job_id. The
-- jq_router_*_on ones go to node abs(node % n), as PL/Proxy's modular_mapping maps a number to one
-- of the n nodes: the functions below pass a node number (0 to n - 1), or the hashtext() of a
-- queue's name or a job's key, which so finds its node without a look at n.
DO $$
DECLARE
    f text[];
BEGIN
    FOREACH f SLICE 1 IN ARRAY ARRAY[
        ['jq_heartbeat(job_id bigint, worker text, lease_token bigint, extend interval DEFAULT NULL) RETURNS boolean',
         NULL],
        ['jq_complete(job_id bigint, worker text, lease_token bigint, result jsonb DEFAULT NULL) RETURNS boolean',
         NULL],
        ['jq_fail(job_id bigint, worker text, lease_token bigint, error_code text, error_message text DEFAULT NULL, '
         'retryable boolean DEFAULT true, retry_in interval DEFAULT NULL) RETURNS boolean',
         NULL],
        ['jq_progress(job_id bigint, worker text, lease_token bigint, progress jsonb) RETURNS boolean', NULL],
        ['jq_progress_of(job_id bigint, worker text, lease_token bigint) RETURNS jsonb', NULL],
        ['jq_snooze(job_id bigint, worker text, lease_token bigint, delay interval) RETURNS boolean', NULL],
        ['jq_result(job_id bigint) RETURNS TABLE (status jq_status, result jsonb, last_error_code text, '
         'last_error_message text, finished_at timestamptz)',
         NULL],
        ['jq_await(job_id bigint, wait interval) RETURNS TABLE (status jq_status, result jsonb, last_error_code text, '
         'last_error_message text, finished_at timestamptz)',
         NULL],
        ['jq_retry(job_id bigint) RETURNS boolean', NULL],
        ['jq_cancel(job_id bigint) RETURNS boolean', NULL],
        ['jq_purge(job_id bigint) RETURNS boolean', NULL],
        ['jq_parent_results(job_id bigint) RETURNS TABLE (job_id bigint, status jq_status, result jsonb)', NULL],

        ['jq_router_enqueue_on(node int, queue_name text, payload jsonb, priority int, run_at timestamptz, '
         'max_attempts int, dedup_key text, ordering_key text, concurrency_key text, expires_at timestamptz) '
         'RETURNS bigint',
         'jq_enqueue(queue_name, payload, priority, run_at, max_attempts, dedup_key, ordering_key, concurrency_key, '
         'expires_at)'],
        ['jq_router_enqueue_batch_on(node int, queue_name text, payloads jsonb[], priority int, run_at timestamptz, '
         'max_attempts int, concurrency_key text, expires_at timestamptz) RETURNS SETOF bigint',
         'jq_enqueue_batch(queue_name, payloads, priority, run_at, max_attempts, concurrency_key, expires_at)'],
        -- With depends_on: apart from the two above, so that an enqueue without it makes the same
        -- call as before, which a node still on pg_jobqueue 0.3.0 answers.
        ['jq_router_enqueue_after_on(node int, queue_name text, payload jsonb, priority int, run_at timestamptz, '
         'max_attempts int, dedup_key text, ordering_key text, concurrency_key text, expires_at timestamptz, '
         'depends_on bigint[]) RETURNS bigint',
         'jq_enqueue(queue_name, payload, priority, run_at, max_attempts, dedup_key, ordering_key, concurrency_key, '
         'expires_at, depends_on)'],
        ['jq_router_enqueue_batch_after_on(node int, queue_name text, payloads jsonb[], priority int, '
         'run_at timestamptz, max_attempts int, concurrency_key text, expires_at timestamptz, depends_on bigint[]) '
         'RETURNS SETOF bigint',
         'jq_enqueue_batch(queue_name, payloads, priority, run_at, max_attempts, concurrency_key, expires_at, '
         'depends_on)'],
        ['jq_router_claim_on(node int, queue text, worker text, lease interval, batch_size int, wait interval) '
         'RETURNS TABLE (id bigint, queue_name text, payload jsonb, priority int, attempt_count int, '
         'max_attempts int, lease_token bigint, lease_expires_at timestamptz)',
         'jq_claim(queue, worker, lease, batch_size, wait)'],
        ['jq_router_complete_batch_on(node int, job_ids bigint[], worker text, lease_tokens bigint[], '
         'results jsonb[]) RETURNS TABLE (id bigint)',
         'jq_complete_batch(job_ids, worker, lease_tokens, results)'],
        ['jq_router_reap_on(node int, max_jobs int) RETURNS int', 'jq_reap(max_jobs)'],
        -- jq_await of a job that does not exist checks `wait` exactly as jq_claim does, and returns
        -- at once (ids start at 1).
        ['jq_router_check_wait_on(node int, wait interval) RETURNS TABLE (status jq_status, result jsonb, '
         'last_error_code text, last_error_message text, finished_at timestamptz)',
         'jq_await(0, wait)']
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

-- An enqueue without a key into a spread queue, where any node will do: at a node chosen at random,
-- and on to the next while one cannot be reached. Either one payload, as jq_enqueue, or a batch, as
-- jq_enqueue_batch: one call to one node, which keeps the ids in input order. The number of nodes
-- is looked up only once a node has failed: PL/Proxy maps the random number to a node itself.
--
-- A node that fails in the middle of the call (rather than refusing the connection) may have
-- committed the job before its answer was lost; the copy then made on the next node is a second
-- run of the same work, which at-least-once delivery allows (guide, "Scaling out").
CREATE FUNCTION jq_router_enqueue_anywhere(queue_name text, batch boolean, payload jsonb, payloads jsonb[],
                                           priority int, run_at timestamptz, max_attempts int,
                                           expires_at timestamptz)
RETURNS SETOF bigint
LANGUAGE plpgsql
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    first int := pg_catalog.floor(pg_catalog.random() OPERATOR(pg_catalog.*) 1073741824);
    nodes int;
BEGIN
    FOR i IN 0 .. 32767 LOOP  -- until a node takes the jobs, or every node has failed
        BEGIN
            IF batch THEN
                RETURN QUERY SELECT * FROM @extschema@.jq_router_enqueue_batch_on(
                    first + i, queue_name, payloads, priority, run_at, max_attempts, NULL, expires_at);
            ELSE
                RETURN NEXT @extschema@.jq_router_enqueue_on(
                    first + i, queue_name, payload, priority, run_at, max_attempts, NULL, NULL, NULL, expires_at);
            END IF;
            RETURN;
        EXCEPTION WHEN OTHERS THEN
            nodes := COALESCE(nodes, @extschema@.jq_router_nodes());
            IF i >= nodes - 1 OR NOT @extschema@.jq_router_unreachable(SQLSTATE) THEN
                RAISE;
            END IF;
        END;
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

-- pg_jobqueue's functions that choose a node, with its signatures.

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

-- jq_claim's body (PL/pgSQL cannot name an argument and a result column both queue_name).
--
-- A queue on one node: one call, which waits there as a direct claim does. A spread queue: rounds
-- in which each node is asked in turn, from a random one, for what is still wanted, until
-- batch_size jobs are taken; a node that cannot be reached is passed over. With `wait`, while a
-- round finds nothing, the claim waits on one node for a slice (at most 0.5 s, a different node
-- each time) and then asks them all again, so that a job enqueued on any node is claimed at most
-- a slice after its commit.
CREATE FUNCTION jq_router_claim(queue text, worker text, lease interval, batch_size int, wait interval)
RETURNS TABLE (id bigint, queue_name text, payload jsonb, priority int, attempt_count int, max_attempts int,
               lease_token bigint, lease_expires_at timestamptz)
LANGUAGE plpgsql
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    nodes int;
    first int;
    node int;
    taken int := 0;
    got int;
    reached int;
    slices int := 0;
    deadline timestamptz;
BEGIN
    IF NOT @extschema@.jq_router_is_spread(queue) THEN
        RETURN QUERY SELECT * FROM @extschema@.jq_router_claim_on(COALESCE(pg_catalog.hashtext(queue), 0), queue,
                                                                  worker, lease, batch_size, wait);
        RETURN;
    END IF;
    nodes := @extschema@.jq_router_nodes();
    first := pg_catalog.floor(pg_catalog.random() OPERATOR(pg_catalog.*) nodes);
    IF wait IS NOT NULL THEN
        -- The nodes only ever see slices of the wait: let one of them refuse it whole, as a direct
        -- claim would (a negative wait, or one over its pg_jobqueue.max_wait).
        FOR i IN 0 .. nodes - 1 LOOP
            BEGIN
                PERFORM FROM @extschema@.jq_router_check_wait_on((first + i) % nodes, wait);
                EXIT;
            EXCEPTION WHEN OTHERS THEN
                IF NOT @extschema@.jq_router_unreachable(SQLSTATE) THEN
                    RAISE;
                END IF;
            END;
        END LOOP;
        deadline := pg_catalog.clock_timestamp() + wait;
    END IF;
    LOOP
        reached := 0;
        FOR i IN 0 .. nodes - 1 LOOP
            BEGIN
                RETURN QUERY SELECT * FROM @extschema@.jq_router_claim_on((first + i) % nodes, queue, worker, lease,
                                                                          batch_size - taken, NULL);
                GET DIAGNOSTICS got = ROW_COUNT;
                taken := taken + got;
                reached := reached + 1;
            EXCEPTION WHEN OTHERS THEN
                IF NOT @extschema@.jq_router_unreachable(SQLSTATE) THEN
                    -- What other nodes granted in this call is returned: those leases are held.
                    IF taken > 0 THEN
                        RETURN;
                    END IF;
                    RAISE;
                ELSIF i = nodes - 1 AND reached = 0 AND taken = 0 THEN
                    RAISE;  -- no node could be reached
                END IF;
            END;
            -- After the call, so that the first node sees batch_size as given, and refuses a bad one.
            EXIT WHEN taken >= batch_size;
        END LOOP;
        EXIT WHEN taken > 0 OR deadline IS NULL OR pg_catalog.clock_timestamp() >= deadline;
        node := (first + slices) % nodes;
        slices := slices + 1;
        BEGIN
            RETURN QUERY SELECT * FROM @extschema@.jq_router_claim_on(
                node, queue, worker, lease, batch_size,
                LEAST(interval '0.5 seconds',
                      GREATEST(interval '0', deadline - pg_catalog.clock_timestamp())));
            GET DIAGNOSTICS got = ROW_COUNT;
            taken := taken + got;
        EXCEPTION WHEN OTHERS THEN
            IF NOT @extschema@.jq_router_unreachable(SQLSTATE) THEN
                RAISE;
            END IF;
        END;
        EXIT WHEN taken > 0;
    END LOOP;
END
$$;

CREATE FUNCTION jq_claim(queue_name text, worker text, lease interval DEFAULT NULL, batch_size int DEFAULT 1,
                         wait interval DEFAULT NULL)
RETURNS TABLE (id bigint, queue_name text, payload jsonb, priority int, attempt_count int, max_attempts int,
               lease_token bigint, lease_expires_at timestamptz)
LANGUAGE sql
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
    SELECT * FROM @extschema@.jq_router_claim($1, $2, $3, $4, $5)
$$;

-- The ids of a batch may be on several nodes: one call to each, with its jobs in input order. Each
-- node's part commits on its own: if one node refuses its part, or cannot be reached, the parts
-- sent before may stand, and sending the batch again is safe (a job completed already is refused).
-- Arrays that the nodes refuse whole (NULL, empty, of other lengths) go whole to one node, so that
-- the caller sees that node's refusal.
CREATE FUNCTION jq_complete_batch(job_ids bigint[], worker text, lease_tokens bigint[], results jsonb[] DEFAULT NULL)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    node int;
    ids bigint[];
    tokens bigint[];
    outcomes jsonb[];
BEGIN
    IF pg_catalog.array_ndims(job_ids) IS DISTINCT FROM 1
       OR pg_catalog.array_ndims(lease_tokens) IS DISTINCT FROM 1
       OR pg_catalog.cardinality(lease_tokens) <> pg_catalog.cardinality(job_ids)
       OR results IS NOT NULL AND (pg_catalog.array_ndims(results) IS DISTINCT FROM 1
                                   OR pg_catalog.cardinality(results) <> pg_catalog.cardinality(job_ids)) THEN
        RETURN QUERY SELECT * FROM @extschema@.jq_router_complete_batch_on(
            @extschema@.jq_router_node_of(job_ids[1]), job_ids, worker, lease_tokens, results);
        RETURN;
    END IF;
    FOR node, ids, tokens, outcomes IN
        SELECT @extschema@.jq_router_node_of(b.job), pg_catalog.array_agg(b.job ORDER BY b.n),
               pg_catalog.array_agg(b.token ORDER BY b.n), pg_catalog.array_agg(b.outcome ORDER BY b.n)
        FROM ROWS FROM (pg_catalog.unnest(job_ids), pg_catalog.unnest(lease_tokens), pg_catalog.unnest(results))
             WITH ORDINALITY b(job, token, outcome, n)
        GROUP BY 1
    LOOP
        RETURN QUERY SELECT * FROM @extschema@.jq_router_complete_batch_on(
            node, ids, worker, tokens, CASE WHEN results IS NOT NULL THEN outcomes END);
    END LOOP;
END
$$;

-- Every node that can be reached reaps; the sum of what they reaped. Fails only when none can be.
CREATE FUNCTION jq_reap(max_jobs int DEFAULT 10000) RETURNS int
LANGUAGE plpgsql
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
DECLARE
    nodes int := @extschema@.jq_router_nodes();
    reaped int := 0;
    reached int := 0;
BEGIN
    FOR node IN 0 .. nodes - 1 LOOP
        BEGIN
            reaped := reaped + @extschema@.jq_router_reap_on(node, max_jobs);
            reached := reached + 1;
        EXCEPTION WHEN OTHERS THEN
            IF NOT @extschema@.jq_router_unreachable(SQLSTATE) OR (node = nodes - 1 AND reached = 0) THEN
                RAISE;
            END IF;
        END;
    END LOOP;
    RETURN reaped;
END
$$;

REVOKE ALL ON FUNCTION jq_router_spread, jq_router_is_spread, jq_router_nodes, jq_router_node_of,
                       jq_router_unreachable, jq_router_enqueue_on, jq_router_enqueue_batch_on,
                       jq_router_claim_on, jq_router_complete_batch_on, jq_router_reap_on, jq_router_check_wait_on,
                       jq_router_enqueue_anywhere, jq_router_claim, jq_router_enqueue_after_on,
                       jq_router_enqueue_batch_after_on, jq_router_node_after,
                       jq_enqueue, jq_enqueue_batch, jq_claim, jq_heartbeat, jq_complete, jq_complete_batch, jq_fail,
                       jq_progress, jq_progress_of, jq_snooze, jq_result, jq_await, jq_retry, jq_cancel, jq_reap,
                       jq_parent_results, jq_purge
FROM PUBLIC;
