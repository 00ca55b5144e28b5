//! Queues over several servers (guide, "Scaling out"): three servers run pg_jobqueue as nodes 0,
//! 1 and 2 (sql/router/node.sql), and a fourth runs the router, pg_jobqueue_router over PL/Proxy.
//! Jobs land where the routing rules say, calls about a job reach the server that holds it,
//! refusals keep their SQLSTATE, a server that is down is passed over and found again, and the
//! randomized fault history keeps every guarantee through the router while a server restarts.
//!
//! Run with `cargo test -p jq-harness --test router -- --test-threads=1` (part of
//! `make test-integration`).

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use jq_harness::client::{connect_as, drain, live_jobs, sqlstate, status};
use jq_harness::history::{self, Failures, History};
use jq_harness::{text_rows, wait_until, Client, Cluster};

const NODES: usize = 3;

/// The node that issued a job id: node k issues k * 2^48 + 1 to (k + 1) * 2^48 - 1.
fn node_of(id: i64) -> usize {
    (id >> 48) as usize
}

/// Three servers with pg_jobqueue in schema `jobqueue`, made nodes 0, 1 and 2, and a router server
/// with pg_jobqueue_router in a schema of the same name, set up as the header of its install script
/// (sql/router/pg_jobqueue_router--0.4.0.sql) says. Every database finds the functions through its
/// search_path.
struct Fleet {
    nodes: Vec<Cluster>,
    router: Cluster,
    /// The foreign server's options naming the nodes: p0, p1, p2.
    partitions: String,
}

impl Fleet {
    fn start() -> Fleet {
        let nodes: Vec<Cluster> = (0..NODES)
            .map(|k| {
                let node = Cluster::start_without_extension(&[]);
                node.connect()
                    .batch_execute(
                        "CREATE SCHEMA jobqueue;
                         CREATE EXTENSION pg_jobqueue SCHEMA jobqueue;
                         ALTER DATABASE postgres SET search_path = public, jobqueue;",
                    )
                    .unwrap();
                let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sql/router/node.sql");
                let made = Command::new(jq_harness::pg_dir().join("bin/psql"))
                    .args(["-X", "-q", "-h", "127.0.0.1", "-p", &node.port().to_string(), "-U", "postgres"])
                    .args(["-d", "postgres", "-v", &format!("node={k}"), "-f"])
                    .arg(script)
                    .output()
                    .expect("psql runs");
                assert!(made.status.success(), "node.sql failed: {}", String::from_utf8_lossy(&made.stderr));
                node
            })
            .collect();
        let router = Cluster::start_without_extension(&[]);
        let partitions: Vec<String> = nodes
            .iter()
            .enumerate()
            .map(|(k, node)| format!("p{k} 'host=127.0.0.1 port={} dbname=postgres'", node.port()))
            .collect();
        let fleet = Fleet { nodes, router, partitions: partitions.join(", ") };
        fleet.set_up_router("postgres", "");
        fleet
    }

    /// Makes `database` of the router server a router over the nodes, with pg_jobqueue_router of
    /// `version` ("" for the current one).
    fn set_up_router(&self, database: &str, version: &str) {
        let version = if version.is_empty() { String::new() } else { format!("VERSION '{version}'") };
        connect_as(&self.router, database, "postgres")
            .batch_execute(&format!(
                "CREATE EXTENSION plproxy;
                 CREATE SERVER pg_jobqueue FOREIGN DATA WRAPPER plproxy OPTIONS (modular_mapping '1', {});
                 CREATE USER MAPPING FOR PUBLIC SERVER pg_jobqueue;
                 CREATE SCHEMA jobqueue;
                 CREATE EXTENSION pg_jobqueue_router {version} SCHEMA jobqueue;
                 ALTER DATABASE {database} SET search_path = public, jobqueue;",
                self.partitions
            ))
            .unwrap();
    }

    fn router(&self) -> Client {
        self.router.connect()
    }

    fn node(&self, k: usize) -> Client {
        self.nodes[k].connect()
    }

    /// The ids of `queue`'s jobs on each node, read from the nodes themselves.
    fn ids_per_node(&self, queue: &str, status: &str) -> Vec<BTreeSet<i64>> {
        (0..NODES)
            .map(|k| {
                let rows = self
                    .node(k)
                    .query("SELECT id FROM jq_jobs WHERE queue_name = $1 AND status::text LIKE $2", &[&queue, &status])
                    .unwrap();
                rows.iter().map(|row| row.get(0)).collect()
            })
            .collect()
    }

    /// The node a name hashes to, abs(hashtext(name) % 3) as guide, "Scaling out" states it,
    /// computed apart from the router (which leaves the modulo to PL/Proxy).
    fn node_for(&self, name: &str) -> usize {
        self.node(0).query_one("SELECT abs(hashtext($1) % 3)", &[&name]).unwrap().get::<_, i32>(0) as usize
    }

    /// A name made from `prefix` that hashes to node `k`.
    fn name_on(&self, prefix: &str, k: usize) -> String {
        (0..).map(|i| format!("{prefix}-{i}")).find(|name| self.node_for(name) == k).unwrap()
    }
}

/// Each statement fails with its SQLSTATE.
fn assert_sqlstates(client: &mut Client, cases: &[(&str, &str)]) {
    for (sql, expected) in cases {
        assert_eq!(sqlstate(client, sql).as_deref(), Some(*expected), "{sql}");
    }
}

/// One claim through the router of up to 100 jobs of `queue`: their ids.
fn claim_all(router: &mut Client, queue: &str) -> BTreeSet<i64> {
    let rows = router.query("SELECT id FROM jq_claim($1, 'w', interval '5 minutes', 100)", &[&queue]).unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

fn enqueue(router: &mut Client, sql: &str, params: &[&(dyn postgres::types::ToSql + Sync)]) -> i64 {
    router.query_one(sql, params).unwrap().get(0)
}

/// Where jobs land. A queue that is not spread lives on the node its name hashes to: every one of
/// its jobs is there, under an id of that node. A spread queue's jobs land on all three nodes, each
/// under an id of the node that holds it. On a spread queue, jobs that share an ordering,
/// concurrency or dedup key share the node of that key (the first of them that is set), so a
/// dedup key gives the same job back; a batch goes whole to one node and its ids come back in
/// input order. A router that ignored the placement, the spread list or the keys would scatter
/// these jobs (ten jobs of one key land on one node by chance once in 6,561 runs).
#[test]
fn jobs_land_on_the_server_the_routing_rules_name() {
    let fleet = Fleet::start();
    let mut router = fleet.router();

    let home = fleet.node_for("placed");
    for n in 0..30 {
        let id = enqueue(&mut router, "SELECT jq_enqueue('placed', jsonb_build_object('n', $1::int))", &[&n]);
        assert_eq!(node_of(id), home, "a job of the placed queue got an id of another node");
    }
    let placed = fleet.ids_per_node("placed", "%");
    for (k, ids) in placed.iter().enumerate() {
        assert_eq!(ids.len(), if k == home { 30 } else { 0 }, "node {k} holds placed jobs: {placed:?}");
    }

    router.batch_execute("SELECT jq_router_spread('spread')").unwrap();
    for n in 0..60 {
        enqueue(&mut router, "SELECT jq_enqueue('spread', jsonb_build_object('n', $1::int))", &[&n]);
    }
    let spread = fleet.ids_per_node("spread", "%");
    for (k, ids) in spread.iter().enumerate() {
        assert!(!ids.is_empty(), "node {k} holds none of the spread queue's jobs: {spread:?}");
        assert!(ids.iter().all(|&id| node_of(id) == k), "node {k} holds a job under another node's id");
    }
    assert_eq!(spread.iter().map(BTreeSet::len).sum::<usize>(), 60);

    // Keys: the first of ordering_key, concurrency_key and dedup_key that is set picks the node.
    let keys = [
        (Some("order-1"), None, None),
        (None, Some("limit-1"), None),
        (Some("order-2"), Some("limit-2"), None),
        (None, Some("limit-3"), Some("dedup-3")),
    ];
    for (ordering, concurrency, dedup) in keys {
        let sql = "SELECT jq_enqueue('spread', '{}', ordering_key => $1, concurrency_key => $2, dedup_key => $3)";
        let nodes: BTreeSet<usize> =
            (0..10).map(|_| node_of(enqueue(&mut router, sql, &[&ordering, &concurrency, &dedup]))).collect();
        let key = ordering.or(concurrency).or(dedup).unwrap();
        assert_eq!(nodes, BTreeSet::from([fleet.node_for(key)]), "jobs with key {key}");
    }
    let once: BTreeSet<i64> =
        (0..10).map(|_| enqueue(&mut router, "SELECT jq_enqueue('spread', '{}', dedup_key => 'once')", &[])).collect();
    assert_eq!(once.len(), 1, "a dedup key gave several jobs: {once:?}");
    assert_eq!(node_of(*once.first().unwrap()), fleet.node_for("once"));

    // A batch: one node, ids in input order (the payload of the i-th id is i).
    let ids: Vec<i64> = router
        .query(
            "SELECT * FROM jq_enqueue_batch('spread', ARRAY(SELECT jsonb_build_object('n', i) FROM generate_series(0, 19) i))",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(ids.len(), 20);
    let k = node_of(ids[0]);
    assert!(ids.iter().all(|&id| node_of(id) == k), "a batch was split over nodes: {ids:?}");
    let payloads: HashMap<i64, i32> = fleet
        .node(k)
        .query("SELECT id, (payload->>'n')::int FROM jq_jobs WHERE id = ANY($1)", &[&ids])
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let order: Vec<i32> = ids.iter().map(|id| payloads[id]).collect();
    assert_eq!(order, (0..20).collect::<Vec<_>>(), "the batch's ids are not in input order");
    let keyed_batch: Vec<i64> = router
        .query(
            "SELECT * FROM jq_enqueue_batch('spread', ARRAY['{}', '{}']::jsonb[], concurrency_key => 'limit-1')",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(keyed_batch.iter().all(|&id| node_of(id) == fleet.node_for("limit-1")));
}

/// Calls about a job reach the server that holds it. Jobs on all three nodes are claimed through
/// the router in one call, which returns the columns of jq_claim (guide, "jq_claim"); then each
/// job's heartbeat, progress, completion with a result, failure, snooze, result, await, re-drive,
/// cancel and batch completion go through the router and change the job on its own node. Sent to
/// any other node, each of these calls would find no such job and return false (or no row).
#[test]
fn calls_about_a_job_reach_the_server_that_holds_it() {
    let fleet = Fleet::start();
    let mut router = fleet.router();
    router.batch_execute("SELECT jq_router_spread('work')").unwrap();
    for k in 0..NODES {
        fleet.node(k).batch_execute("SELECT jq_enqueue('work', '{}') FROM generate_series(1, 3)").unwrap();
    }

    let claim = router.prepare("SELECT * FROM jq_claim('work', 'w', interval '1 minute', 9)").unwrap();
    let columns: Vec<(&str, String)> =
        claim.columns().iter().map(|c| (c.name(), c.type_().name().to_owned())).collect();
    let expected = [
        ("id", "int8"),
        ("queue_name", "text"),
        ("payload", "jsonb"),
        ("priority", "int4"),
        ("attempt_count", "int4"),
        ("max_attempts", "int4"),
        ("lease_token", "int8"),
        ("lease_expires_at", "timestamptz"),
    ];
    assert_eq!(columns, expected.map(|(name, ty)| (name, ty.to_owned())));
    let claimed: Vec<(i64, i64)> = router.query(&claim, &[]).unwrap().iter().map(|r| (r.get(0), r.get(6))).collect();
    assert_eq!(claimed.len(), 9, "one claim takes what every node has");
    let by_node: Vec<Vec<(i64, i64)>> =
        (0..NODES).map(|k| claimed.iter().copied().filter(|(id, _)| node_of(*id) == k).collect()).collect();
    assert!(by_node.iter().all(|jobs| jobs.len() == 3), "{by_node:?}");

    let yes = |router: &mut Client, sql: &str, id: i64, token: i64| -> bool {
        router.query_one(sql, &[&id, &token]).unwrap().get(0)
    };
    for (k, jobs) in by_node.iter().enumerate() {
        let ([a, b, c], step) = ([jobs[0], jobs[1], jobs[2]], format!("{{\"node\": {k}}}"));
        assert!(yes(&mut router, "SELECT jq_heartbeat($1, 'w', $2)", a.0, a.1));
        assert!(yes(&mut router, &format!("SELECT jq_progress($1, 'w', $2, '{step}')"), a.0, a.1));
        let progress: String =
            router.query_one("SELECT jq_progress_of($1, 'w', $2)::text", &[&a.0, &a.1]).unwrap().get(0);
        assert_eq!(progress, step);
        assert!(yes(
            &mut router,
            "SELECT jq_complete($1, 'w', $2, result => jsonb_build_object('job', $1::bigint))",
            a.0,
            a.1
        ));
        let result: (String, String) = router
            .query_one("SELECT status::text, result->>'job' FROM jq_result($1)", &[&a.0])
            .map(|r| (r.get(0), r.get(1)))
            .unwrap();
        assert_eq!(result, ("succeeded".to_owned(), a.0.to_string()));
        let awaited: String = router.query_one("SELECT status::text FROM jq_await($1, '1 s')", &[&a.0]).unwrap().get(0);
        assert_eq!(awaited, "succeeded");

        assert!(yes(&mut router, "SELECT jq_fail($1, 'w', $2, 'BROKEN', retryable => false)", b.0, b.1));
        assert!(router.query_one("SELECT jq_retry($1)", &[&b.0]).unwrap().get::<_, bool>(0));
        assert!(yes(&mut router, "SELECT jq_snooze($1, 'w', $2, '1 hour')", c.0, c.1));
        assert!(router.query_one("SELECT jq_cancel($1)", &[&c.0]).unwrap().get::<_, bool>(0));

        let states: Vec<String> = [a, b, c].iter().map(|(id, _)| status(&mut fleet.node(k), *id)).collect();
        assert_eq!(states, ["succeeded", "pending", "cancelled"], "node {k}");
        assert!(router.query_one("SELECT jq_purge($1)", &[&c.0]).unwrap().get::<_, bool>(0), "node {k}");
        let kept: i64 = fleet.node(k).query_one("SELECT count(*) FROM jq_jobs WHERE id = $1", &[&c.0]).unwrap().get(0);
        assert_eq!(kept, 0, "the cancelled job is purged on node {k}");
    }

    // The re-driven jobs, one on each node, completed in one batch through the router.
    let again: Vec<(i64, i64)> = router
        .query("SELECT id, lease_token FROM jq_claim('work', 'w', interval '1 minute', 10)", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(again.iter().map(|(id, _)| node_of(*id)).collect::<BTreeSet<_>>(), BTreeSet::from([0, 1, 2]));
    let (ids, tokens): (Vec<i64>, Vec<i64>) = again.into_iter().unzip();
    let mut completed: Vec<i64> = router
        .query("SELECT id FROM jq_complete_batch($1, 'w', $2)", &[&ids, &tokens])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    completed.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(completed, expected);
    let succeeded: i64 = (0..NODES)
        .map(|k| {
            fleet
                .node(k)
                .query_one("SELECT count(*) FROM jq_jobs WHERE id = ANY($1) AND status = 'succeeded'", &[&ids])
                .unwrap()
                .get::<_, i64>(0)
        })
        .sum();
    assert_eq!(succeeded, 3);
}

/// Refusals keep their SQLSTATE through the router: the nodes' 22023 and 22004 for bad input,
/// checked by the node each call goes to (on a placed and on a spread queue, with and without a
/// key), and their 42501 for a role without the right on the queue, since PL/Proxy connects as the
/// caller. The router's own door: a role it was not granted gets its 42501, and so does one that
/// lacks USAGE on the foreign server or tries to spread a queue. No function of the router is
/// executable by PUBLIC, and each pins its search_path.
#[test]
fn refusals_keep_their_sqlstate_through_the_router() {
    let fleet = Fleet::start();
    let mut router = fleet.router();
    router.batch_execute("SELECT jq_router_spread('spread')").unwrap();
    let refusals = [
        ("SELECT jq_enqueue('', '{}')", "22023"),
        ("SELECT jq_enqueue(NULL, '{}')", "22004"),
        ("SELECT jq_enqueue('placed', NULL)", "22004"),
        ("SELECT jq_enqueue('spread', NULL)", "22004"),
        ("SELECT jq_enqueue('spread', '{}', ordering_key => repeat('k', 300))", "22023"),
        ("SELECT jq_enqueue('spread', '{}', max_attempts => 0)", "22023"),
        ("SELECT jq_enqueue_batch('spread', array_fill('{}'::jsonb, ARRAY[1001]))", "22023"),
        ("SELECT jq_enqueue_batch('placed', NULL)", "22004"),
        ("SELECT * FROM jq_claim('spread', '')", "22023"),
        ("SELECT * FROM jq_claim('placed', NULL)", "22004"),
        ("SELECT * FROM jq_claim('spread', 'w', batch_size => 0)", "22023"),
        ("SELECT * FROM jq_claim('spread', 'w', lease => '-1 s')", "22023"),
        ("SELECT * FROM jq_claim('spread', 'w', wait => '-1 s')", "22023"),
        ("SELECT * FROM jq_claim('spread', 'w', wait => '1 day')", "22023"),
        ("SELECT * FROM jq_claim('placed', 'w', wait => '1 day')", "22023"),
        ("SELECT jq_heartbeat(NULL, 'w', 1)", "22004"),
        ("SELECT jq_heartbeat(281474976710657, 'w', 1, extend => '0 s')", "22023"),
        ("SELECT jq_fail(562949953421313, 'w', 1, NULL)", "22004"),
        ("SELECT * FROM jq_complete_batch(ARRAY[1, 281474976710657], 'w', ARRAY[1])", "22023"),
        ("SELECT * FROM jq_complete_batch(ARRAY[1, 281474976710657], NULL, ARRAY[1, 1])", "22004"),
        ("SELECT * FROM jq_await(1, NULL)", "22004"),
        ("SELECT jq_router_spread('bad name')", "22023"),
    ];
    assert_sqlstates(&mut router, &refusals);

    for k in 0..NODES {
        fleet
            .node(k)
            .batch_execute("CREATE ROLE app LOGIN; SELECT jq_grant('app', 'spread', 'enqueue'), jq_grant('app', 'spread', 'consume')")
            .unwrap();
    }
    router
        .batch_execute(
            "CREATE ROLE app LOGIN; CREATE ROLE unmapped LOGIN; CREATE ROLE outsider LOGIN;
             GRANT USAGE ON SCHEMA jobqueue TO app, unmapped;
             GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA jobqueue TO app, unmapped;
             GRANT USAGE ON FOREIGN SERVER pg_jobqueue TO app;",
        )
        .unwrap();
    let mut app = connect_as(&fleet.router, "postgres", "app");
    let id: i64 = app.query_one("SELECT jq_enqueue('spread', '{}')", &[]).unwrap().get(0);
    let claimed: i64 = app.query_one("SELECT id FROM jq_claim('spread', 'app')", &[]).unwrap().get(0);
    assert_eq!(claimed, id);
    let denied = [
        ("SELECT jq_enqueue('other', '{}')", "42501"),
        ("SELECT * FROM jq_claim('other', 'app')", "42501"),
        ("SELECT jq_reap()", "42501"),
        ("SELECT jq_router_spread('other')", "42501"),
    ];
    assert_sqlstates(&mut app, &denied);
    let mut unmapped = connect_as(&fleet.router, "postgres", "unmapped");
    assert_eq!(sqlstate(&mut unmapped, "SELECT jq_enqueue('spread', '{}')").as_deref(), Some("42501"));
    let mut outsider = connect_as(&fleet.router, "postgres", "outsider");
    assert_eq!(sqlstate(&mut outsider, "SELECT jobqueue.jq_enqueue('spread', '{}')").as_deref(), Some("42501"));

    let functions = text_rows(
        &mut router,
        "SELECT p.proname || ': ' || (p.proacl IS NULL OR EXISTS (SELECT FROM aclexplode(p.proacl) a WHERE a.grantee = 0))
                             || ', ' || coalesce(array_to_string(p.proconfig, ' '), 'no settings')
         FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
         JOIN pg_extension e ON e.oid = d.refobjid WHERE e.extname = 'pg_jobqueue_router' ORDER BY 1",
    );
    assert!(functions.len() > 20, "{functions:?}");
    for function in &functions {
        assert!(function.ends_with(": false, search_path=pg_catalog, jobqueue, pg_temp"), "{function}");
    }
}

/// A workflow through the router (guide, "Workflows"): a job enqueued with depends_on goes to the
/// node of its queue with the job it waits for, is held there (no claim through the router returns
/// it) until that job's completion through the router releases it, and jq_parent_results through
/// the router reads what that job returned. A batch waits the same way. On a spread queue a job
/// without keys goes to the node of its dependencies, whichever node that is.
#[test]
fn a_workflow_through_the_router_waits_on_one_node() {
    let fleet = Fleet::start();
    let mut router = fleet.router();
    let home = fleet.node_for("flow");
    let parent = enqueue(&mut router, "SELECT jq_enqueue('flow', '{\"step\": 1}')", &[]);
    let child =
        enqueue(&mut router, "SELECT jq_enqueue('flow', '{\"step\": 2}', depends_on => ARRAY[$1::bigint])", &[&parent]);
    assert_eq!((node_of(parent), node_of(child)), (home, home));
    let awaiting = |id: i64| -> i32 {
        fleet.node(node_of(id)).query_one("SELECT awaiting FROM jq_jobs WHERE id = $1", &[&id]).unwrap().get(0)
    };
    assert_eq!(awaiting(child), 1, "held on its node");

    let claimed: Vec<(i64, i64)> = router
        .query("SELECT id, lease_token FROM jq_claim('flow', 'w', batch_size => 10)", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(claimed.iter().map(|c| c.0).collect::<Vec<_>>(), [parent], "the child is held while its parent runs");
    let done: bool = router
        .query_one("SELECT jq_complete($1, 'w', $2, result => '{\"sum\": 42}')", &[&parent, &claimed[0].1])
        .unwrap()
        .get(0);
    assert!(done);
    assert_eq!(awaiting(child), 0, "the parent's completion through the router released it");
    assert_eq!(claim_all(&mut router, "flow"), BTreeSet::from([child]));
    let results = text_rows(
        &mut router,
        &format!("SELECT job_id || ' ' || status || ' ' || result::text FROM jq_parent_results({child})"),
    );
    assert_eq!(results, [format!("{parent} succeeded {{\"sum\": 42}}")]);

    let batch: Vec<i64> = router
        .query(
            "SELECT * FROM jq_enqueue_batch('flow', ARRAY['{}', '{}']::jsonb[], depends_on => ARRAY[$1::bigint])",
            &[&child],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(batch.iter().all(|&id| node_of(id) == home && awaiting(id) == 1), "{batch:?}");
    let token: i64 =
        fleet.node(home).query_one("SELECT lease_token FROM jq_jobs WHERE id = $1", &[&child]).unwrap().get(0);
    assert!(router.query_one("SELECT jq_complete($1, 'w', $2)", &[&child, &token]).unwrap().get::<_, bool>(0));
    assert_eq!(claim_all(&mut router, "flow"), batch.into_iter().collect());

    // A spread queue: each child lands on the node of the job it waits for.
    router.batch_execute("SELECT jq_router_spread('fan')").unwrap();
    for k in 0..NODES {
        let parent: i64 = fleet.node(k).query_one("SELECT jq_enqueue('fan', '{}')", &[]).unwrap().get(0);
        let mut children: Vec<i64> = (0..5)
            .map(|_| {
                enqueue(&mut router, "SELECT jq_enqueue('fan', '{}', depends_on => ARRAY[$1::bigint])", &[&parent])
            })
            .collect();
        let batch =
            "SELECT * FROM jq_enqueue_batch('fan', ARRAY['{}', '{}']::jsonb[], depends_on => ARRAY[$1::bigint])";
        children.extend(router.query(batch, &[&parent]).unwrap().iter().map(|r| r.get::<_, i64>(0)));
        assert!(children.iter().all(|&id| node_of(id) == k && awaiting(id) == 1), "node {k}: {children:?}");
    }
}

/// A job and the jobs it depends on live on one node: an enqueue through the router that names a
/// job of another node than the one its job goes to is refused with 0A000, naming depends_on, and
/// nothing is written on any node. That holds for jq_enqueue and jq_enqueue_batch on a placed
/// queue, on a spread queue whose key picks the node, and on a spread queue without keys whose
/// dependencies are on two nodes. What the node itself checks keeps its own SQLSTATE: a NULL
/// element and an id its node never issued are its 22023.
#[test]
fn a_dependency_on_another_node_is_refused() {
    let fleet = Fleet::start();
    let mut router = fleet.router();
    router.batch_execute("SELECT jq_router_spread('fan')").unwrap();
    let home = fleet.node_for("flow");
    let other = (home + 1) % NODES;
    let local: i64 = fleet.node(home).query_one("SELECT jq_enqueue('parents', '{}')", &[]).unwrap().get(0);
    let foreign: i64 = fleet.node(other).query_one("SELECT jq_enqueue('parents', '{}')", &[]).unwrap().get(0);
    let key_elsewhere = fleet.name_on("key", other);
    let written = |fleet: &Fleet| -> Vec<String> {
        (0..NODES)
            .flat_map(|k| {
                text_rows(
                    &mut fleet.node(k),
                    "SELECT count(*) || ' jobs' FROM jq_live_jobs
                     UNION ALL SELECT count(*) || ' dependencies' FROM jq_job_dependencies",
                )
            })
            .collect()
    };
    let before = written(&fleet);

    let refused = [
        format!("SELECT jq_enqueue('flow', '{{}}', depends_on => ARRAY[{foreign}])"),
        format!("SELECT jq_enqueue('flow', '{{}}', depends_on => ARRAY[{local}, {foreign}])"),
        format!("SELECT jq_enqueue_batch('flow', ARRAY['{{}}']::jsonb[], depends_on => ARRAY[{foreign}])"),
        format!("SELECT jq_enqueue('fan', '{{}}', depends_on => ARRAY[{local}, {foreign}])"),
        format!("SELECT jq_enqueue_batch('fan', ARRAY['{{}}']::jsonb[], depends_on => ARRAY[{local}, {foreign}])"),
        format!("SELECT jq_enqueue('fan', '{{}}', ordering_key => '{key_elsewhere}', depends_on => ARRAY[{local}])"),
        format!(
            "SELECT jq_enqueue_batch('fan', ARRAY['{{}}']::jsonb[], concurrency_key => '{key_elsewhere}',
                                     depends_on => ARRAY[{local}])"
        ),
    ];
    for sql in &refused {
        let error = router.batch_execute(sql).unwrap_err();
        let error = error.as_db_error().unwrap_or_else(|| panic!("{sql}: {error}"));
        assert_eq!(error.code().code(), "0A000", "{sql}: {}", error.message());
        assert!(error.message().contains("depends_on"), "{sql}: {}", error.message());
    }
    let never_issued = (home as i64) << 48 | 999_999;
    let node_checks = [
        (format!("SELECT jq_enqueue('flow', '{{}}', depends_on => ARRAY[{local}, NULL])"), "22023"),
        (format!("SELECT jq_enqueue('flow', '{{}}', depends_on => ARRAY[{never_issued}])"), "22023"),
        ("SELECT jq_enqueue('fan', '{}', depends_on => ARRAY[NULL]::bigint[])".to_owned(), "22023"),
    ];
    for (sql, code) in &node_checks {
        assert_eq!(sqlstate(&mut router, sql).as_deref(), Some(*code), "{sql}");
    }
    assert_eq!(written(&fleet), before, "a refused enqueue wrote nothing on any node");

    // The same jobs on one node are taken: the local job's node, whichever way the job gets there.
    let key_home = fleet.name_on("key", home);
    let taken = [
        format!("SELECT jq_enqueue('flow', '{{}}', depends_on => ARRAY[{local}])"),
        format!("SELECT jq_enqueue('fan', '{{}}', ordering_key => '{key_home}', depends_on => ARRAY[{local}])"),
        format!("SELECT jq_enqueue('fan', '{{}}', depends_on => ARRAY[{local}])"),
    ];
    for sql in &taken {
        assert_eq!(node_of(enqueue(&mut router, sql, &[])), home, "{sql}");
    }
}

/// Every object of pg_jobqueue_router in a database with its definition: functions and who may
/// call them, with the initial privileges pg_dump leaves out; types; the table's columns and
/// constraints; and what pg_dump keeps.
fn router_objects(client: &mut Client) -> Vec<String> {
    text_rows(
        client,
        "WITH member AS (
             SELECT d.classid, d.objid FROM pg_depend d
             JOIN pg_extension e ON e.oid = d.refobjid AND d.refclassid = 'pg_extension'::regclass
             WHERE e.extname = 'pg_jobqueue_router' AND d.deptype = 'e'
         )
         SELECT 'function ' || p.oid::regprocedure || ' ' || coalesce(p.proacl::text, 'default') || ': '
                || pg_get_functiondef(p.oid)
         FROM pg_proc p JOIN member m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
         UNION ALL
         SELECT 'initial privileges ' || pg_describe_object(i.classoid, i.objoid, i.objsubid) || ' ' || i.initprivs::text
         FROM pg_init_privs i JOIN member m ON m.classid = i.classoid AND m.objid = i.objoid
         UNION ALL
         SELECT 'type ' || t.oid::regtype || ': ' || coalesce(string_agg(en.enumlabel, ',' ORDER BY en.enumsortorder), '')
         FROM pg_type t JOIN member m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
         LEFT JOIN pg_enum en ON en.enumtypid = t.oid GROUP BY t.oid
         UNION ALL
         SELECT format('column %s.%s #%s %s not null %s', c.relname, a.attname, a.attnum,
                       format_type(a.atttypid, a.atttypmod), a.attnotnull)
         FROM pg_class c JOIN member m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
         JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
         UNION ALL
         SELECT format('constraint %s %s', co.conname, pg_get_constraintdef(co.oid))
         FROM pg_constraint co JOIN member m ON m.classid = 'pg_class'::regclass AND m.objid = co.conrelid
         UNION ALL
         SELECT format('dumped %s %s', c::regclass, cond)
         FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(c, cond) WHERE e.extname = 'pg_jobqueue_router'
         ORDER BY 1",
    )
}

/// The router of release 0.3.0 updated in place (`ALTER EXTENSION pg_jobqueue_router UPDATE`) has
/// exactly the objects of a fresh install, given the same grants (the DBA's `GRANT EXECUTE ON ALL
/// FUNCTIONS IN SCHEMA`, guide "Scaling out"): a role granted the functions of 0.3.0 may call the
/// new jq_enqueue with depends_on and jq_parent_results, and those grants are not taken for the
/// extension's own, which pg_dump would leave out.
#[test]
fn a_router_updated_from_0_3_0_matches_a_fresh_install() {
    let fleet = Fleet::start();
    for k in 0..NODES {
        fleet
            .node(k)
            .batch_execute(
                "CREATE ROLE app LOGIN; SELECT jq_grant('app', 'flow', 'enqueue'), jq_grant('app', 'flow', 'consume')",
            )
            .unwrap();
    }
    const GRANTS: &str = "GRANT USAGE ON SCHEMA jobqueue TO app;
                          GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA jobqueue TO app;
                          GRANT USAGE ON FOREIGN SERVER pg_jobqueue TO app;";
    let mut router = fleet.router();
    router.batch_execute("CREATE ROLE app LOGIN").unwrap();
    router.batch_execute(GRANTS).unwrap();
    router.batch_execute("CREATE DATABASE upgraded").unwrap();
    fleet.set_up_router("upgraded", "0.3.0");
    let mut old = connect_as(&fleet.router, "upgraded", "postgres");
    old.batch_execute(GRANTS).unwrap();
    old.batch_execute("ALTER EXTENSION pg_jobqueue_router UPDATE").unwrap();
    let version = text_rows(&mut old, "SELECT extversion FROM pg_extension WHERE extname = 'pg_jobqueue_router'");
    assert_eq!(version, ["0.4.0"]);

    let (upgraded, fresh) = (router_objects(&mut old), router_objects(&mut router));
    let differences: Vec<_> =
        upgraded.iter().filter(|o| !fresh.contains(o)).chain(fresh.iter().filter(|o| !upgraded.contains(o))).collect();
    assert!(differences.is_empty(), "the updated router differs from a fresh install: {differences:#?}");

    let mut app = connect_as(&fleet.router, "upgraded", "app");
    let parent: i64 = app.query_one("SELECT jq_enqueue('flow', '{}')", &[]).unwrap().get(0);
    let child: i64 =
        app.query_one("SELECT jq_enqueue('flow', '{}', depends_on => ARRAY[$1::bigint])", &[&parent]).unwrap().get(0);
    let (id, token): (i64, i64) = app
        .query_one("SELECT id, lease_token FROM jq_claim('flow', 'app')", &[])
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(id, parent, "the child waits for its parent");
    assert!(app.query_one("SELECT jq_complete($1, 'app', $2)", &[&id, &token]).unwrap().get::<_, bool>(0));
    let results = text_rows(&mut app, &format!("SELECT job_id || ' ' || status FROM jq_parent_results({child})"));
    assert_eq!(results, [format!("{parent} succeeded")]);
}

/// A server that is down is passed over, and found again. With node 2 stopped, one claim on a
/// spread queue returns every pending job of nodes 0 and 1, without an error; enqueues without keys
/// land on them; jq_reap sums what they reap. What only node 2 can serve (a job it holds, a key or a
/// queue placed on it) fails rather than landing elsewhere. Started again, node 2's jobs are
/// claimed and its lease holder's heartbeat is taken. A waiting claim on a spread queue returns a
/// job enqueued on any node while it waits, each node in turn. With every node down, a claim fails
/// rather than finding nothing.
#[test]
fn a_server_that_is_down_is_passed_over_and_found_again() {
    let fleet = Fleet::start();
    let mut router = fleet.router();
    router
        .batch_execute(
            "SELECT jq_router_spread('spread'); SELECT jq_enqueue('spread', '{}') FROM generate_series(1, 30)",
        )
        .unwrap();
    let mut holder = fleet.node(2);
    let (held, token): (i64, i64) = holder
        .query_one("SELECT id, lease_token FROM jq_claim('spread', 'holder', interval '5 minutes')", &[])
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    drop(holder);
    let pending = fleet.ids_per_node("spread", "pending");
    assert!(pending.iter().all(|ids| !ids.is_empty()), "{pending:?}");
    let (key_on_2, queue_on_2) = (fleet.name_on("key", 2), fleet.name_on("queue", 2));

    fleet.nodes[2].halt();
    let claimed = claim_all(&mut router, "spread");
    assert_eq!(claimed, pending[0].union(&pending[1]).copied().collect());
    let added: BTreeSet<i64> =
        (0..20).map(|_| enqueue(&mut router, "SELECT jq_enqueue('spread', '{}')", &[])).collect();
    assert!(added.iter().all(|&id| node_of(id) != 2));
    router.query_one("SELECT jq_reap()", &[]).unwrap();
    let needs_node_2 = [
        format!("SELECT jq_enqueue('spread', '{{}}', ordering_key => '{key_on_2}')"),
        format!("SELECT jq_enqueue('{queue_on_2}', '{{}}')"),
        format!("SELECT jq_heartbeat({held}, 'holder', {token})"),
    ];
    for sql in &needs_node_2 {
        assert!(sqlstate(&mut router, sql).is_some(), "{sql} succeeded while node 2 was down");
    }

    fleet.nodes[2].start_again();
    let claimed = claim_all(&mut router, "spread");
    assert_eq!(claimed, pending[2].union(&added).copied().collect());
    let alive: bool = router.query_one("SELECT jq_heartbeat($1, 'holder', $2)", &[&held, &token]).unwrap().get(0);
    assert!(alive, "the lease on node 2 outlived its restart");

    // Each waiting claim says whether it returned while it still waited: one that waited on another
    // node for its whole wait would find the job only in its last look, after the wait ran out.
    router.batch_execute("SELECT jq_router_spread('idle')").unwrap();
    for k in 0..NODES {
        let mut waiter = fleet.router();
        let claim = thread::spawn(move || -> Option<(i64, bool)> {
            waiter
                .query_opt(
                    "SELECT id, clock_timestamp() < statement_timestamp() + interval '20 seconds'
                     FROM jq_claim('idle', 'w', wait => interval '20 seconds')",
                    &[],
                )
                .unwrap()
                .map(|r| (r.get(0), r.get(1)))
        });
        thread::sleep(Duration::from_millis(300));
        let id: i64 = fleet.node(k).query_one("SELECT jq_enqueue('idle', '{}')", &[]).unwrap().get(0);
        assert_eq!(claim.join().unwrap(), Some((id, true)), "a waiting claim missed a job enqueued on node {k}");
    }

    for node in &fleet.nodes {
        node.halt();
    }
    assert!(
        sqlstate(&mut router, "SELECT * FROM jq_claim('spread', 'w')").is_some(),
        "a claim found nothing, without error"
    );
    assert!(sqlstate(&mut router, "SELECT jq_reap()").is_some());
    assert!(sqlstate(&mut router, "SELECT jq_enqueue('spread', '{}')").is_some());
}

/// The randomized fault history of boundary_12_a_randomized_history_keeps_every_guarantee
/// (faults.rs), through the router on a queue spread over the three nodes: six workers with random
/// stalls past their lease, dropped connections, short leases, failures, heartbeats, snoozes,
/// progress reports and results, and a reaper calling the router's jq_reap. Node 1 is stopped (a
/// fast shutdown) while it holds running jobs, and started again: meanwhile claims take the other
/// nodes' jobs, and the workers send their reports about node 1's jobs again until it answers (by
/// then their leases have expired, and the reports are refused). Where every job ended is read
/// from the nodes themselves; every guarantee of the original holds, and every job is on the node
/// its id names.
#[test]
fn a_randomized_history_through_the_router_keeps_every_guarantee() {
    let operations: usize = std::env::var("JQ_SOAK_OPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1500);
    let fleet = Fleet::start();
    for k in 0..NODES {
        fleet.node(k).batch_execute(history::QUEUE_SETTINGS).unwrap();
    }
    let mut router = fleet.router();
    router.batch_execute("SELECT jq_router_spread('chaos')").unwrap();
    let jobs = history::enqueue_jobs(&mut router, (operations / 5).max(300) as i32);

    let done = Arc::new(AtomicBool::new(false));
    let reaper = history::start_reaper(&fleet.router.dsn(), Failures::Retried, done.clone());
    let workers = history::start_workers(&fleet.router.dsn(), operations, Failures::Retried);
    let mut node_1 = fleet.node(1);
    wait_until("node 1 holds running jobs", || {
        node_1.query_one("SELECT count(*) FROM jq_jobs WHERE status = 'running'", &[]).unwrap().get::<_, i64>(0) > 0
    });
    drop(node_1);
    fleet.nodes[1].restart_after(Duration::from_secs(1));
    let histories: Vec<History> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let drained = drain(&mut router, "chaos", |_| (0..NODES).map(|k| live_jobs(&mut fleet.node(k), "chaos")).sum());
    done.store(true, Ordering::SeqCst);
    reaper.join().unwrap();

    let mut endings = Vec::new();
    for k in 0..NODES {
        let on_node = history::endings(&mut fleet.node(k));
        assert!(on_node.iter().all(|job| node_of(job.id()) == k), "node {k} holds a job under another node's id");
        assert!(!on_node.is_empty(), "node {k} got none of the jobs");
        endings.extend(on_node);
    }
    let summary = history::check(&histories, drained, &endings, jobs);
    println!(
        "randomized history through the router, node 1 stopped and started again: {operations} operations on {summary}"
    );
}
