-- $1 replayed_to, $2 timeline: this server lifetime, which had no row when its claim looked.
-- GREATEST is SQL syntax, not a function: nothing can capture it.
-- Its epoch: one above every epoch so far, and at least (timeline - 1) << 16, unless a row for it
-- was committed since (then nothing is inserted, and that row's epoch serves). An insert, never an
-- update, so no other claim waits for it; a session racing this one may add the same epoch for the
-- same lifetime, which is as safe.
-- The timeline's floor is for a promoted standby (guide, "Failover"): the old primary may have
-- raised epochs that never reached it, but all of them on the old timeline, so below the floor of
-- the new one (unless one timeline saw 65,536 server lifetimes).
INSERT INTO jq_token_epochs (epoch, replayed_to, timeline)
SELECT GREATEST(coalesce(pg_catalog.max(epoch), -1) + 1, ($2 - 1) * 65536), $1, $2 FROM jq_token_epochs
HAVING NOT coalesce(pg_catalog.bool_or(replayed_to = $1 AND timeline = $2), false)
RETURNING epoch
