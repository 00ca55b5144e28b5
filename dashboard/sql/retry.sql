-- $1 job id. Re-drives a dead or cancelled job; false: in another state, or not the role's to see.
SELECT jq_retry($1)
