-- The classic SKIP LOCKED queue, as blog posts and many in-house systems write it.
CREATE TABLE jobs (
    id         bigserial PRIMARY KEY,
    payload    jsonb NOT NULL,
    status     text NOT NULL DEFAULT 'pending',
    locked_by  text,
    locked_at  timestamptz,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX jobs_pending ON jobs (id) WHERE status = 'pending';
