-- $1 settings (jsonb)
-- The type of a settings argument and, for an object, its keys, read by the server rather than
-- decoded in the library: a value of any depth is answered here, and an unknown key or a value
-- that is not an object is then refused with 22023 (src/api/configure.rs).
SELECT pg_catalog.jsonb_typeof($1),
       CASE WHEN pg_catalog.jsonb_typeof($1) OPERATOR(pg_catalog.=) 'object'::pg_catalog.text
            THEN ARRAY(SELECT pg_catalog.jsonb_object_keys($1)) END
