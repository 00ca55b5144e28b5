-- $1 job id. Cancels a pending or running job; false: in another state, or not the role's to see.
SELECT jq_cancel($1)
