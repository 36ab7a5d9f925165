package main

import "github.com/kagzi/kagzi/cmd/kagzi/internal/ops"

// The operating commands live in package ops.
func init() {
	register(ops.NewScheduleCmd)
	register(ops.NewLimitCmd)
	register(ops.NewRateLimitCmd)
	register(ops.NewRetentionCmd)
	register(ops.NewWorkerCmd)
	register(ops.NewWorkflowCmd)
	register(ops.NewQueueCmd)
	register(ops.NewBatchCmd)
	register(ops.NewTokenCmd)
	register(ops.NewTriggerCmd)
	register(ops.NewWebhookCmd)
	register(ops.NewAPITokenCmd)
}
