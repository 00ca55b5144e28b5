-- $1 schedule name. Restarts its ticks from the next one after now.
SELECT jq_resume_schedule($1)
