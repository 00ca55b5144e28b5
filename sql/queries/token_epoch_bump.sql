-- $1 replayed_to, $2 timeline: this server lifetime, which has no row yet.
-- Its epoch: one above every epoch so far. An insert, never an update, so no other claim waits for
-- it; a session racing this one may add the same epoch for the same lifetime, which is as safe.
INSERT INTO jq_token_epochs (epoch, replayed_to, timeline)
SELECT coalesce(pg_catalog.max(epoch), -1) + 1, $1, $2 FROM jq_token_epochs
RETURNING epoch
