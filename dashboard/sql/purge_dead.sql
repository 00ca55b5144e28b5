-- $1 queue_name, $2 error code (NULL: any), $3 at most this many. Deletes dead jobs, the
-- longest-dead first.
SELECT jq_purge_dead($1, $2, $3)
