-- $1 now
-- The day partitions of jq_job_history (guide, "Storage") for today and the next two days (UTC)
-- that do not exist yet, each as the statements that make it: a plain table with the two indexes
-- every partition has (see sql/schema/tables.sql), then ATTACH, which takes only a SHARE UPDATE
-- EXCLUSIVE lock on jq_job_history, so completions go on meanwhile (CREATE TABLE ... PARTITION OF
-- would take an ACCESS EXCLUSIVE one); and whether the day is today's (`current`), whose jobs
-- completions are writing into the default partition right now (see src/api/retention.rs).
SELECT pg_catalog.format('CREATE TABLE %I.%I (LIKE %I.jq_job_history INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                         s.schema, d.name, s.schema),
       pg_catalog.format('CREATE INDEX %I ON %I.%I (id)', d.name || '_id', s.schema, d.name),
       pg_catalog.format('CREATE INDEX %I ON %I.%I (queue_id, finished_at)', d.name || '_queue', s.schema, d.name),
       pg_catalog.format('ALTER TABLE %I.jq_job_history ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
                         s.schema, s.schema, d.name, d.lo, d.lo + interval '24 hours'),
       d.lo <= $1 AS current
FROM (SELECT n.nspname AS schema FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE c.oid = 'jq_job_history'::pg_catalog.regclass::pg_catalog.oid) AS s
CROSS JOIN LATERAL (
    SELECT 'jq_job_history_' || pg_catalog.to_char(day, 'YYYYMMDD') AS name,
           day AT TIME ZONE 'UTC' AS lo
    FROM pg_catalog.generate_series(pg_catalog.date_trunc('day', $1 AT TIME ZONE 'UTC'),
                                    pg_catalog.date_trunc('day', $1 AT TIME ZONE 'UTC') + interval '2 days',
                                    interval '1 day') AS day
) AS d
WHERE pg_catalog.to_regclass(pg_catalog.format('%I.%I', s.schema, d.name)) IS NULL
ORDER BY d.name
