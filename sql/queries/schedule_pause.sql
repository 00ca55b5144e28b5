-- $1 name, $2 paused, $3 next_run (when resumed: the first tick after now; NULL: keep it)
-- Pauses or resumes the schedule; true only if that changed it. Ticks that fall while it is paused
-- are never made up: a resumed schedule goes on from its next tick.
UPDATE jq_schedule_specs s
SET paused = $2, next_run = coalesce($3, s.next_run)
WHERE s.name = $1 AND s.paused <> $2
RETURNING s.name
