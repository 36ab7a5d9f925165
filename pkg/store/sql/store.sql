-- Statements about the store itself, not one table.

-- name: StorePing :exec
SELECT 1

-- name: StoreBeginBounded :exec
BEGIN; SET LOCAL idle_in_transaction_session_timeout = 5000

-- name: StoreAsyncCommit :exec
SET LOCAL synchronous_commit = off
