-- $1 queue_name, $2 privilege. Whether the database lets the role do it (guide, "Security").
SELECT jq_has_right($1, $2)
