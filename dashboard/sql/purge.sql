-- $1 job id. Deletes a dead or cancelled job with its events; false: in another state, or not the
-- role's to see.
SELECT jq_purge($1)
