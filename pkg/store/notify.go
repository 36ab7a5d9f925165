package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	RunID     uuid.UUID  // NotifyCancel, NotifySchedule (the template)
	WorkerID  uuid.UUID  // NotifyCancel: the holder
	// Terminate (NotifyCancel): the run was terminated and its lease is
	// void; otherwise it was asked to cancel and its lease holds.
	Terminate bool
	Finished  []FinishedRun // NotifyDone
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
}

// ParseNotification decodes a trigger payload, rejecting malformed ones with
// ErrInvalidArgument.
func ParseNotification(payload string) (Notification, error) {
	var r rawNotification
	if err := json.Unmarshal([]byte(payload), &r); err != nil {
		return Notification{}, invalidf("notification %q: %v", clip(payload), err)
	}
	n := Notification{Kind: r.K, Namespace: r.NS, Queue: r.Q, At: r.At, RunID: r.ID, WorkerID: r.W, Terminate: !r.R}
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

// Listener holds one dedicated connection that takes a Postgres advisory
// lock (so one process of many listens) and then LISTENs on NotifyChannel.
// If the connection drops, the lock goes with the session and a standby's
// blocked lock request succeeds at once, which is how relay leadership
// moves. If the leader's host dies or is cut off, both ends of the
// connection give up on the silent peer within seconds (see
// lockConnConfig): the server ends the session, and the deposed listener's
// OnLeader(false) follows.
type Listener struct {
	// URL is the database to connect to.
	URL string
	// LockKey is the advisory lock that elects the one listener.
	LockKey int64
	// OnLeader is called with true after the lock is held and LISTEN is
	// active (consumers should read their backlog then), and with false
	// when the connection is lost.
	OnLeader func(ctx context.Context, leader bool)
	// OnNotification receives each raw payload, in order, on the
	// listener's goroutine; it must not block for long.
	OnNotification func(ctx context.Context, payload string)
	// OnError receives non-fatal errors (connection lost, reconnect failed).
	OnError func(err error)
	// Retry is the wait before reconnecting (default 200 ms).
	Retry time.Duration
}

// Run connects, waits for the lock, listens and delivers notifications
// until ctx ends, reconnecting after every failure. It returns ctx's error.
func (l *Listener) Run(ctx context.Context) error {
	return retryLoop(ctx, l.Retry, l.OnError, l.session)
}

func (l *Listener) session(ctx context.Context) error {
	conn, err := lockedConn(ctx, l.URL, l.LockKey, "listener")
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{NotifyChannel}.Sanitize()); err != nil {
		return fmt.Errorf("listener: listen: %w", err)
	}
	if l.OnLeader != nil {
		l.OnLeader(ctx, true)
		defer l.OnLeader(ctx, false)
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) || ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listener: wait: %w", err)
		}
		if l.OnNotification != nil {
			l.OnNotification(ctx, n.Payload)
		}
	}
}
