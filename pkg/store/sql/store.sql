-- Statements about the store itself, not one table.

-- name: StorePing :exec
SELECT 1
