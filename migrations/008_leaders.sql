-- Terms of the leaders elected with an advisory lock (the reaper's). A
-- frozen process keeps its database sessions, so the lock alone cannot keep
-- a deposed leader from writing when it resumes: a statement it prepared
-- before its freeze would run after its successor took over. So each
-- election opens a new term here (store.LeadersElect, on the leader's own
-- session, once the lock is granted), and every write of the leader runs in
-- a transaction that first reads its term FOR SHARE (store.Fenced): a term
-- that is no longer current refuses the write, and the next election's
-- UPDATE waits for the writes of the term before it to commit.
CREATE TABLE kagzi.leaders (
    role       text PRIMARY KEY,
    term       bigint NOT NULL,
    elected_at timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE kagzi.leaders;
