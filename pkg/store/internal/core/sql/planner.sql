-- Planner settings for one statement, in the transaction that runs it
-- (bykey.go says when and why).

-- name: PlannerSeqScanOff :one
SELECT set_config('enable_seqscan', 'off', true)

-- name: PlannerSeqScanOn :one
SELECT set_config('enable_seqscan', 'on', true)

-- name: PlannerByKeyOnceOn :one
SELECT set_config('enable_seqscan', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true)

-- name: PlannerByKeyOnceOff :one
SELECT set_config('enable_seqscan', 'on', true), set_config('plan_cache_mode', 'auto', true)

-- name: PlannerGenericOn :one
SELECT set_config('plan_cache_mode', 'force_generic_plan', true)

-- name: PlannerGenericOff :one
SELECT set_config('plan_cache_mode', 'auto', true)
