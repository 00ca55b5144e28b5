-- $1 schedule name. Stops its ticks; false: no such schedule the role manages, or already paused.
SELECT jq_pause_schedule($1)
