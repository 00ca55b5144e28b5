-- Run once on each new connection. Pins the search path to pg_catalog and the extension's schema
-- (nothing another role creates elsewhere can capture an unqualified jq_* call), and plans every
-- statement for its parameters: a page's filters are often NULL, and a generic plan would keep
-- the branches a custom plan drops. JIT off: the figures views cost enough to pass jit_above_cost
-- on a large database, and compiling them took longer than running them (bench/dashboard.py: the
-- overview of 1,000 queues in about 2 s with JIT, well under half that without). No row: the
-- extension is not installed in this database.
SELECT pg_catalog.set_config('search_path', 'pg_catalog, ' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) ', pg_temp', false),
       pg_catalog.set_config('plan_cache_mode', 'force_custom_plan', false),
       pg_catalog.set_config('statement_timeout', '10s', false),
       pg_catalog.set_config('jit', 'off', false)
FROM pg_catalog.pg_extension e
JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
WHERE e.extname OPERATOR(pg_catalog.=) 'pg_jobqueue'
