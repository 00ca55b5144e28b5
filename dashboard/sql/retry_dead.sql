-- $1 queue_name, $2 error code (NULL: any), $3 at most this many. Re-drives dead jobs, as
-- purge_dead.sql deletes them: the same parameters, so one loop calls either until it is done.
SELECT jq_retry_dead($1, $2, $3)
