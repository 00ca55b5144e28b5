-- $1 role (oid), $2 queue_name, $3 privilege
-- Whether a row of jq_grants gives the role (or a role whose privileges it inherits) the privilege
-- on the queue: by the queue's name, or by a prefix pattern ending in '*'.
SELECT EXISTS (
    SELECT 1
    FROM jq_grants g
    WHERE g.privilege = $3
      AND (g.queue = $2
           OR (pg_catalog.right(g.queue, 1) = '*'
               AND pg_catalog.starts_with($2, pg_catalog.left(g.queue, -1))))
      AND pg_catalog.pg_has_role($1, g.role::oid, 'USAGE')
)
