-- $1 replayed_to, $2 timeline: this server lifetime, which had no row when its claim looked.
-- Its epoch: one above every epoch so far, unless a row for it was committed since (then nothing is
-- inserted, and that row's epoch serves). An insert, never an update, so no other claim waits for
-- it; a session racing this one may add the same epoch for the same lifetime, which is as safe.
INSERT INTO jq_token_epochs (epoch, replayed_to, timeline)
SELECT coalesce(pg_catalog.max(epoch), -1) + 1, $1, $2 FROM jq_token_epochs
HAVING NOT coalesce(pg_catalog.bool_or(replayed_to = $1 AND timeline = $2), false)
RETURNING epoch
