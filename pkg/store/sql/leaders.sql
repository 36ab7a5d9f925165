-- Leaders: the advisory locks that elect them, and their terms
-- (kagzi.leaders).

-- name: LeadersElect :one
INSERT INTO kagzi.leaders (role, term) VALUES (@role, 1)
ON CONFLICT (role) DO UPDATE SET term = kagzi.leaders.term + 1, elected_at = now()
RETURNING term

-- name: LeadersFence :one
SELECT term FROM kagzi.leaders WHERE role = @role FOR SHARE
