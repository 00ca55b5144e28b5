-- $1 name, $2 the tick the pass found due (its next_run), $3 the next tick after now,
-- $4 the tick of the last job enqueued (NULL: none), $5 that job (NULL: none)
-- Moves the schedule on past the ticks made, guarded on the tick it was due at.
UPDATE jq_schedule_specs s
SET next_run = $3,
    last_run = coalesce($4, s.last_run),
    last_job_id = coalesce($5, s.last_job_id)
WHERE s.name = $1 AND s.next_run = $2
RETURNING s.name
