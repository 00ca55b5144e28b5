-- $1 queue_name, $2 error code (NULL: any). Re-drives up to 1,000 dead jobs; called until fewer.
SELECT jq_retry_dead($1, $2, 1000)
