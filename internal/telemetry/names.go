package telemetry

// MetricNames are the Prometheus names of Kagzi's own metrics as /metrics
// serves them (OpenTelemetry's names with dots as underscores, the unit
// and, for counters, _total appended; histograms add _bucket, _sum and
// _count). The dashboard and alert rules in deploy/ use only these; a test
// checks that every kagzi_ metric served is listed.
var MetricNames = []string{
	// dispatcher
	"kagzi_queue_depth",
	"kagzi_queue_unserved",
	"kagzi_queue_oldest_due_age_seconds",
	"kagzi_runs_paused",
	"kagzi_runs_completed_total",
	"kagzi_runs_failed_total",
	"kagzi_leases_lost_total",
	"kagzi_dispatch_latency_milliseconds",
	"kagzi_claim_latency_milliseconds",
	"kagzi_report_latency_milliseconds",
	"kagzi_notifications_relayed_total",
	"kagzi_relay_leader",
	// reaper
	"kagzi_workers_online",
	"kagzi_reaper_leader",
	"kagzi_runs_recovered_total",
	"kagzi_leases_expired_total",
	"kagzi_workers_lost_total",
	"kagzi_deadlines_missed_total",
	"kagzi_runs_deleted_total",
	"kagzi_retention_oldest_finished_age_seconds",
	"kagzi_retention_overdue_seconds",
	"kagzi_batch_runs_total",
	"kagzi_batches_completed_total",
	"kagzi_batches_running",
	"kagzi_events_given_up_total",
	"kagzi_events_deleted_total",
	"kagzi_wait_tokens_deleted_total",
	// scheduler
	"kagzi_schedule_fires_total",
	"kagzi_schedule_lateness_milliseconds",
	"kagzi_schedule_skipped_total",
	// client
	"kagzi_runs_started_total",
	// worker
	"kagzi_executions_total",
	"kagzi_step_duration_milliseconds",
}
