-- $1 queue_name, $2 status (text; NULL: pending, running, dead and cancelled), $3 concurrency or
-- ordering key (NULL: any), $4 error code (NULL: any), $5 created longer ago than this interval
-- (text; NULL: any), $6 rows, $7 rows skipped.
-- A page of the queue's jobs, from jq_list_jobs: it reads them through the queue's own index
-- entries, the history's too, where a status test on jq_managed_jobs (a security_barrier view, and
-- enum comparisons are not leakproof) reads every job of the queue. It needs manage on the queue.
SELECT j.id, j.status::text, j.priority, j.attempt_count, j.max_attempts,
       j.created_at::text, j.available_at::text, j.finished_at::text,
       j.last_error_code, coalesce(j.concurrency_key, j.ordering_key), j.lease_owner
FROM jq_list_jobs($1::text, $2::text::jq_status, $3::text, $4::text, $5::text::interval,
                  ($6::bigint)::int, ($7::bigint)::int) j
