-- $1 queue_name, $2 now; follows parts/pending_levels.sql
-- Whether the queue has a pending job that is due: what a waiting claim asks before it writes the
-- first token epoch of a server lifetime, so that a look that would claim nothing writes nothing
-- (and need not return to commit it). The oldest pending job of each priority, until one is due.
SELECT EXISTS (SELECT 1 FROM levels l WHERE l.available_at <= $2)
