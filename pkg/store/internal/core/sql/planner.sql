-- Planner settings for one statement, in the transaction that runs it
-- (bykey.go says when and why).

-- name: PlannerSeqScanOff :one
SELECT set_config('enable_seqscan', 'off', true)

-- name: PlannerSeqScanOn :one
SELECT set_config('enable_seqscan', 'on', true)
