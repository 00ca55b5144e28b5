-- $1 replayed_to, $2 timeline: this server lifetime.
-- The highest token epoch, and whether this lifetime has a row (see jq_token_epochs in
-- sql/schema/tables.sql). No rows at all: no claim has run since the extension was created.
SELECT pg_catalog.max(epoch), pg_catalog.bool_or(replayed_to = $1 AND timeline = $2) FROM jq_token_epochs
