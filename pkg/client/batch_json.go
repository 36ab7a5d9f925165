package client

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// BatchJSON is a batch as JSON shows it, the one shape of `kagzi --json
// batch show` and the console's /api/v1/batches.
type BatchJSON struct {
	BatchID uuid.UUID `json:"batch_id"`
	Action  string    `json:"action"`
	Query   string    `json:"query,omitempty"`
	// ByIDs says the batch's runs were listed rather than queried.
	ByIDs      bool            `json:"by_ids,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Event      string          `json:"event,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	CreatedBy  string          `json:"created_by,omitempty"`
	State      string          `json:"state"`
	Rate       int             `json:"rate"`
	Total      int             `json:"total"`
	Done       int             `json:"done"`
	Failed     int             `json:"failed"`
	Skipped    int             `json:"skipped"`
	Pending    int             `json:"pending"`
	CreatedAt  time.Time       `json:"created_at"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

// NewBatchJSON is b's JSON form: times in UTC, no payload for a batch
// without one.
func NewBatchJSON(b Batch) BatchJSON {
	v := BatchJSON{BatchID: b.ID, Action: string(b.Action), Query: b.Query, ByIDs: b.Query == "", Reason: b.Reason,
		Event: b.EventName, CreatedBy: b.CreatedBy, State: string(b.State), Rate: b.Rate, Total: b.Total, Done: b.Done,
		Failed: b.Failed, Skipped: b.Skipped, Pending: b.Pending(), CreatedAt: b.CreatedAt.UTC(), FinishedAt: utc(b.FinishedAt)}
	if len(b.Payload) > 0 && string(b.Payload) != "null" {
		v.Payload = b.Payload
	}
	return v
}

// BatchRunJSON is one run of a batch as JSON shows it: its outcome,
// "pending" while the batch has not acted on it.
type BatchRunJSON struct {
	RunID   uuid.UUID `json:"run_id"`
	Outcome string    `json:"outcome"`
	Error   string    `json:"error,omitempty"`
	// Detail is what a done action made: "fork <run id>", "update <id>".
	Detail  string     `json:"detail,omitempty"`
	ActedAt *time.Time `json:"acted_at,omitempty"`
}

// NewBatchRunsJSON is rs's JSON form.
func NewBatchRunsJSON(rs []BatchRun) []BatchRunJSON {
	out := make([]BatchRunJSON, len(rs))
	for i, r := range rs {
		out[i] = BatchRunJSON{RunID: r.RunID, Outcome: r.Outcome, Error: r.Error, Detail: r.Detail, ActedAt: utc(r.ActedAt)}
		if out[i].Outcome == "" {
			out[i].Outcome = "pending"
		}
	}
	return out
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
