package opsstore

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// A run's durable state and streams are completed steps named by
// protocol.StateStepID, protocol.StreamStepID and protocol.StreamEndStepID
// (the workflow SDK records them like any step). The reads below parse the
// number after the '#' of each step id and order by it as an integer:
// step ids sort as text ("#10" before "#9"), and the order steps were
// recorded in is not the order of a stream when a run was replayed. Each
// read joins the run, so one statement tells the values from whether the
// run ended, in one snapshot: a run seen ended has every step it recorded
// in that snapshot.

// StateValue is the latest value of one state key of a run.
type StateValue struct {
	Key string
	// Version is n of the Set that recorded the value: how many Sets of
	// the key the run made.
	Version    int
	Value      []byte
	RecordedAt *time.Time
}

// StepsStateParams selects the state of a run: one key, or every key.
type StepsStateParams struct {
	Namespace string
	RunID     uuid.UUID
	// Key selects one key; empty reads every key.
	Key string
}

// StateRead is a run's status and its latest state values, read in one
// snapshot.
type StateRead struct {
	Status RunStatus
	// Values holds the latest value of each key that was ever set (of
	// the one key asked for, if any), by key.
	Values []StateValue
}

var stepsStateSQL = stmt("StepsState")

// StepsState returns the latest value of a run's state keys (the Set with
// the highest number of each key) and the run's status. An unknown run is
// ErrNotFound; a key never set is absent from Values.
func (s *Ops) StepsState(ctx context.Context, p StepsStateParams) (StateRead, error) {
	if p.RunID == uuid.Nil {
		return StateRead{}, invalidf("run id is required")
	}
	if p.Key != "" {
		if err := protocol.ValidProgressName("state key", p.Key); err != nil {
			return StateRead{}, invalidf("%v", err)
		}
	}
	rows, err := stepsStateSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"ns": p.Namespace, "run_id": p.RunID,
		"prefix": protocol.StatePrefix, "key": p.Key})
	if err != nil {
		return StateRead{}, mapErr("read state", err)
	}
	defer rows.Close()
	var out StateRead
	found := false
	for rows.Next() {
		found = true
		var key *string
		var n *int
		var v StateValue
		if err := rows.Scan(&out.Status, &key, &n, &v.Value, &v.RecordedAt); err != nil {
			return StateRead{}, mapErr("read state", err)
		}
		if key == nil {
			continue
		}
		v.Key, v.Version = *key, *n
		out.Values = append(out.Values, v)
	}
	if err := rows.Err(); err != nil {
		return StateRead{}, mapErr("read state", err)
	}
	if !found {
		return StateRead{}, fmt.Errorf("read state: run %s: %w", p.RunID, ErrNotFound)
	}
	return out, nil
}

// DefaultStreamRead and MaxStreamRead bound the entries one StepsStream
// returns (StepsStreamParams.Limit).
const (
	DefaultStreamRead = 1000
	MaxStreamRead     = protocol.MaxStreamEntries
)

// StepsStreamParams selects the entries of a run's stream after an index.
type StepsStreamParams struct {
	Namespace string
	RunID     uuid.UUID
	Name      string
	// After is the index of the last entry the reader has: entries with a
	// higher index are returned (0 for all; at most
	// protocol.MaxStreamEntries, the most entries a stream holds).
	After int
	// Limit bounds the entries returned (default DefaultStreamRead, at
	// most MaxStreamRead).
	Limit int
}

// StreamEntry is one entry of a stream.
type StreamEntry struct {
	// Index is the entry's number in the stream, from 1. A Write that
	// failed (a value above the payload limit) leaves its number unused.
	Index      int
	Value      []byte
	RecordedAt *time.Time
}

// StreamRead is what one read of a stream found, in one snapshot.
type StreamRead struct {
	Status RunStatus
	// Entries are those after the asked index, in index order.
	Entries []StreamEntry
	// More: there are entries beyond Entries (the limit cut the read).
	More bool
	// Closed: the workflow closed the stream.
	Closed bool
}

// Ended reports whether the stream can get no more entries than those
// read: it was closed or its run ended, and the read was not cut short.
func (r StreamRead) Ended() bool {
	return !r.More && (r.Closed || r.Status.Terminal())
}

// The closing step sorts first (n 0), then the entries by number; the
// limit leaves room for it and for one entry beyond the page (More).
var stepsStreamSQL = stmt("StepsStream")

// StepsStream returns the entries of a run's stream with an index above
// p.After, in index order, whether the stream was closed, and the run's
// status. An unknown run is ErrNotFound; a stream never written is empty.
func (s *Ops) StepsStream(ctx context.Context, p StepsStreamParams) (StreamRead, error) {
	if p.RunID == uuid.Nil {
		return StreamRead{}, invalidf("run id is required")
	}
	if err := protocol.ValidProgressName("stream name", p.Name); err != nil {
		return StreamRead{}, invalidf("%v", err)
	}
	if p.After < 0 {
		return StreamRead{}, invalidf("stream index %d is negative", p.After)
	}
	if p.After > protocol.MaxStreamEntries {
		return StreamRead{}, invalidf("stream index %d is above the maximum %d: a stream holds at most %d entries",
			p.After, protocol.MaxStreamEntries, protocol.MaxStreamEntries)
	}
	switch {
	case p.Limit == 0:
		p.Limit = DefaultStreamRead
	case p.Limit < 0 || p.Limit > MaxStreamRead:
		return StreamRead{}, invalidf("stream read limit %d: 1 to %d", p.Limit, MaxStreamRead)
	}
	what := fmt.Sprintf("read stream %q", p.Name)
	rows, err := stepsStreamSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"ns": p.Namespace, "run_id": p.RunID,
		"prefix": protocol.StreamPrefix + p.Name + "#", "end": protocol.StreamEnd, "after": p.After, "limit": p.Limit})
	if err != nil {
		return StreamRead{}, mapErr(what, err)
	}
	defer rows.Close()
	var out StreamRead
	found := false
	for rows.Next() {
		found = true
		var n *int
		var e StreamEntry
		if err := rows.Scan(&out.Status, &n, &e.Value, &e.RecordedAt); err != nil {
			return StreamRead{}, mapErr(what, err)
		}
		switch {
		case n == nil:
		case *n == 0:
			out.Closed = true
		case len(out.Entries) == p.Limit:
			out.More = true
		default:
			e.Index = *n
			out.Entries = append(out.Entries, e)
		}
	}
	if err := rows.Err(); err != nil {
		return StreamRead{}, mapErr(what, err)
	}
	if !found {
		return StreamRead{}, fmt.Errorf("%s: run %s: %w", what, p.RunID, ErrNotFound)
	}
	return out, nil
}

// StreamInfo sums up one stream of a run.
type StreamInfo struct {
	Name string
	// Entries counts the recorded entries, and Last is the highest index.
	Entries int
	Last    int
	Closed  bool
}

var stepsStreamsSQL = stmt("StepsStreams")

// StepsStreams lists the streams a run wrote to, by name. An unknown run
// gives an empty list.
func (s *Ops) StepsStreams(ctx context.Context, namespace string, runID uuid.UUID) ([]StreamInfo, error) {
	rows, err := stepsStreamsSQL.Query(ctx, s.h.DB, pgx.NamedArgs{"ns": namespace, "run_id": runID,
		"prefix": protocol.StreamPrefix, "end": protocol.StreamEnd})
	if err != nil {
		return nil, mapErr("list streams", err)
	}
	defer rows.Close()
	out := []StreamInfo{}
	for rows.Next() {
		var i StreamInfo
		if err := rows.Scan(&i.Name, &i.Entries, &i.Last, &i.Closed); err != nil {
			return nil, mapErr("list streams", err)
		}
		out = append(out, i)
	}
	return out, mapErr("list streams", rows.Err())
}
