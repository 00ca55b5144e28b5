-- Retry delay after `attempt` failed attempts, with the queue's backoff_base and backoff_cap (the
-- defaults for a queue without a row): see jq_backoff_delay, which cannot overflow.
CREATE FUNCTION jq_backoff(queue_name text, attempt int) RETURNS interval
LANGUAGE sql VOLATILE PARALLEL SAFE
SET search_path = pg_catalog, @extschema@, pg_temp
AS $$
    SELECT jq_backoff_delay(coalesce(q.backoff_base, interval '1 second'),
                            coalesce(q.backoff_cap, interval '1 hour'), attempt)
    FROM (VALUES (1)) AS one
    LEFT JOIN jq_queues q ON q.queue_name = jq_backoff.queue_name
$$;
