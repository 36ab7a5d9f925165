package ops

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// ScheduleJSON is a schedule as printed with --json.
type ScheduleJSON struct {
	ScheduleID  uuid.UUID       `json:"schedule_id"`
	Namespace   string          `json:"namespace"`
	Queue       string          `json:"queue"`
	Type        string          `json:"type"`
	Version     string          `json:"version,omitempty"`
	Cron        string          `json:"cron"`
	Timezone    string          `json:"timezone"`
	Status      store.RunStatus `json:"status"`
	MaxCatchup  int             `json:"max_catchup"`
	NextFireAt  *time.Time      `json:"next_fire_at,omitempty"`
	LastFiredAt *time.Time      `json:"last_fired_at,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	RetryPolicy *retry.Policy   `json:"retry_policy,omitempty"`
	Input       json.RawMessage `json:"input,omitempty"`
	Overlap     string          `json:"overlap"`
	// JitterMS is the jitter in milliseconds (0: none).
	JitterMS       int64      `json:"jitter_ms,omitempty"`
	BufferedFireAt *time.Time `json:"buffered_fire_at,omitempty"`
	ConcurrencyKey string     `json:"concurrency_key,omitempty"`
	RateLimitKey   string     `json:"rate_limit_key,omitempty"`
}

func toScheduleJSON(s store.Schedule) ScheduleJSON {
	return ScheduleJSON{ScheduleID: s.ID, Namespace: s.Namespace, Queue: s.Queue, Type: s.Type, Version: s.Version,
		Cron: s.Cron, Timezone: s.Timezone, Status: s.Status, MaxCatchup: s.MaxCatchup,
		NextFireAt: cliutil.UTC(s.NextFireAt), LastFiredAt: cliutil.UTC(s.LastFiredAt), CreatedAt: s.CreatedAt.UTC(),
		RetryPolicy: s.RetryPolicy, Input: cliutil.Payload(s.Input), Overlap: string(s.Overlap), JitterMS: s.Jitter.Milliseconds(),
		BufferedFireAt: cliutil.UTC(s.BufferedFireAt), ConcurrencyKey: s.ConcurrencyKey, RateLimitKey: s.RateLimitKey}
}

// WorkerJSON is a worker as printed with --json.
type WorkerJSON struct {
	WorkerID        uuid.UUID           `json:"worker_id"`
	Namespace       string              `json:"namespace"`
	Queue           string              `json:"queue"`
	Hostname        string              `json:"hostname"`
	PID             int                 `json:"pid"`
	Version         string              `json:"version,omitempty"`
	Types           []store.TypeVersion `json:"types"`
	MaxConcurrency  int                 `json:"max_concurrency"`
	Status          store.WorkerStatus  `json:"status"`
	RegisteredAt    time.Time           `json:"registered_at"`
	LastHeartbeatAt time.Time           `json:"last_heartbeat_at"`
	DeregisteredAt  *time.Time          `json:"deregistered_at,omitempty"`
	Labels          map[string]string   `json:"labels,omitempty"`
}

func toWorkerJSON(w store.Worker) WorkerJSON {
	types := w.Types
	if types == nil {
		types = []store.TypeVersion{}
	}
	return WorkerJSON{WorkerID: w.ID, Namespace: w.Namespace, Queue: w.Queue, Hostname: w.Hostname, PID: w.PID,
		Version: w.Version, Types: types, MaxConcurrency: w.MaxConcurrency, Status: w.Status,
		RegisteredAt: w.RegisteredAt.UTC(), LastHeartbeatAt: w.LastHeartbeatAt.UTC(),
		DeregisteredAt: cliutil.UTC(w.DeregisteredAt), Labels: w.Labels}
}
