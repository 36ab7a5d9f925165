package opsstore

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// NotifyChannel is the one channel the triggers notify on (migration 002).
// Keys travel in the payload: channel names are limited, and a channel
// mismatch would silently lose every wakeup.
const NotifyChannel = "kagzi"

// NotificationKind is the "k" field of a notification.
type NotificationKind string

// Notification kinds sent by the triggers.
const (
	NotifyReady    NotificationKind = "r" // runs of a queue claimable at At
	NotifyDone     NotificationKind = "d" // runs reached a terminal status
	NotifyCancel   NotificationKind = "c" // a running run was terminated or asked to cancel
	NotifySchedule NotificationKind = "s" // a schedule template changed
	NotifyProgress NotificationKind = "p" // a run recorded a progress step (protocol.ProgressPrefixes)
	NotifyBatch    NotificationKind = "b" // a batch was created, changed state or recorded outcomes (RunID is the batch's id)
	NotifyEvent    NotificationKind = "e" // an event was published, to fan out to triggers (RunID is the event's id)
)

// FinishedRun is one entry of a NotifyDone notification.
type FinishedRun struct {
	RunID  uuid.UUID
	Status RunStatus
}

// Notification is a decoded trigger payload.
type Notification struct {
	Kind      NotificationKind
	Namespace string
	Queue     string     // NotifyReady
	At        *time.Time // NotifyReady: earliest due; NotifySchedule: next fire (nil: none)
	RunID     uuid.UUID  // NotifyCancel, NotifySchedule (the template), NotifyBatch (the batch), NotifyEvent (the event)
	WorkerID  uuid.UUID  // NotifyCancel: the holder
	// Terminate (NotifyCancel): the run was terminated and its lease is
	// void; otherwise it was asked to cancel and its lease holds.
	Terminate bool
	Finished  []FinishedRun // NotifyDone
	StepID    string        // NotifyProgress: the step recorded
	// BatchState (NotifyBatch) is the batch's state; BatchMoved says it
	// was created or changed state (else it recorded outcomes).
	BatchState string
	BatchMoved bool
}

type rawNotification struct {
	K    NotificationKind `json:"k"`
	NS   string           `json:"ns"`
	Q    string           `json:"q"`
	At   *time.Time       `json:"at"`
	ID   uuid.UUID        `json:"id"`
	W    uuid.UUID        `json:"w"`
	R    bool             `json:"r"`
	Runs [][2]string      `json:"runs"`
	St   string           `json:"st"`
}

// ParseNotification decodes a trigger payload, rejecting malformed ones with
// ErrInvalidArgument.
func ParseNotification(payload string) (Notification, error) {
	var r rawNotification
	if err := json.Unmarshal([]byte(payload), &r); err != nil {
		return Notification{}, invalidf("notification %q: %v", clip(payload), err)
	}
	n := Notification{Kind: r.K, Namespace: r.NS, Queue: r.Q, At: r.At, RunID: r.ID, WorkerID: r.W, Terminate: !r.R, StepID: r.St}
	if n.Namespace == "" {
		return Notification{}, invalidf("notification %q: no namespace", clip(payload))
	}
	switch r.K {
	case NotifyReady:
		if n.Queue == "" || n.At == nil {
			return Notification{}, invalidf("ready notification %q: needs queue and time", clip(payload))
		}
	case NotifyDone:
		if len(r.Runs) == 0 {
			return Notification{}, invalidf("done notification %q: no runs", clip(payload))
		}
		n.Finished = make([]FinishedRun, len(r.Runs))
		for i, pair := range r.Runs {
			id, err := uuid.Parse(pair[0])
			st := RunStatus(pair[1])
			if err != nil || !st.Terminal() {
				return Notification{}, invalidf("done notification %q: bad entry %v", clip(payload), pair)
			}
			n.Finished[i] = FinishedRun{RunID: id, Status: st}
		}
	case NotifyCancel:
		if n.RunID == uuid.Nil || n.WorkerID == uuid.Nil {
			return Notification{}, invalidf("cancel notification %q: needs run and worker", clip(payload))
		}
	case NotifySchedule:
		if n.RunID == uuid.Nil {
			return Notification{}, invalidf("schedule notification %q: needs schedule id", clip(payload))
		}
	case NotifyProgress:
		if n.RunID == uuid.Nil || n.StepID == "" {
			return Notification{}, invalidf("progress notification %q: needs run and step", clip(payload))
		}
	case NotifyBatch:
		n.StepID, n.Terminate, n.BatchState, n.BatchMoved = "", false, r.St, r.R
		if n.RunID == uuid.Nil || n.BatchState == "" {
			return Notification{}, invalidf("batch notification %q: needs batch id and state", clip(payload))
		}
	case NotifyEvent:
		n.StepID, n.Terminate = "", false
		if n.RunID == uuid.Nil {
			return Notification{}, invalidf("event notification %q: needs event id", clip(payload))
		}
	default:
		return Notification{}, invalidf("notification %q: unknown kind %q", clip(payload), r.K)
	}
	return n, nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
