-- One reaper per database: a session-level advisory lock on a fixed key ("jq_reape" in ASCII),
-- held for the life of the worker. A second worker for the same database (started by a launcher
-- that restarted after a crash) does not get it and leaves.
SELECT pg_catalog.pg_try_advisory_lock(7670792418098581605)
