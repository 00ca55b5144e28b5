-- Whether some queue keeps no succeeded job (guide, "Queues that keep nothing"): while none does,
-- completions run without looking at their queue's settings (src/api/lease.rs).
SELECT EXISTS (SELECT 1 FROM jq_queues q WHERE NOT q.keep_succeeded)
