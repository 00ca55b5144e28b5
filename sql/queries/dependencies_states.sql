-- $1 depends_on (bigint[])
-- The status of each dependency still in jq_live_jobs, read without a lock (guide, "Workflows"):
-- hanging a job on another takes no lock that the other's claim, heartbeat or completion could
-- wait for or skip. A dependency that ends while the enqueue is still open may not see the new
-- job's rows; the reap pass settles those (dependencies_ended.sql). One not found here is in the
-- history (succeeded) or no longer kept (src/api/dependencies.rs reads which). In the order of
-- their ids, so that a job with two failed dependencies always names the same one.
SELECT j.id, j.status FROM jq_live_jobs j WHERE j.id = ANY ($1) ORDER BY j.id
