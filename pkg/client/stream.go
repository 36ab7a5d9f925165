package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// StreamEntry is one entry of a run's stream (workflow.Stream) as JSON.
type StreamEntry struct {
	// Index is the entry's number in the stream, from 1.
	Index      int
	Value      json.RawMessage
	RecordedAt *time.Time
}

// StreamEntries reads the entries of the run's stream name from index
// from (1 or less: from the first; at most MaxStreamEntries) that are recorded now, without
// waiting, and whether the stream has ended (closed, or its run ended):
// no entry will follow those returned. An unknown run is ErrNotFound.
func (c *Client) StreamEntries(ctx context.Context, runID uuid.UUID, name string, from int) ([]StreamEntry, bool, error) {
	after, err := streamAfter(name, runID, from)
	if err != nil {
		return nil, false, err
	}
	var out []StreamEntry
	for {
		r, err := c.readStream(ctx, runID, name, after)
		if err != nil {
			return nil, false, err
		}
		for _, e := range r.Entries {
			out = append(out, StreamEntry{Index: e.Index, Value: e.Value, RecordedAt: e.RecordedAt})
			after = e.Index
		}
		if !r.More {
			return out, r.Ended(), nil
		}
	}
}

// StreamInfo sums up one stream a run wrote to.
type StreamInfo struct {
	Name string
	// Entries counts the recorded entries, and Last is the highest index.
	Entries int
	Last    int
	// Closed: the workflow closed the stream.
	Closed bool
}

// Streams lists the streams the run wrote to (at least one entry, or a
// close), by name; a stream never written is not listed, and neither is
// any of an unknown run's.
func (c *Client) Streams(ctx context.Context, runID uuid.UUID) ([]StreamInfo, error) {
	ss, err := c.st.StepsStreams(ctx, c.ns, runID)
	if err != nil {
		return nil, err
	}
	out := make([]StreamInfo, len(ss))
	for i, s := range ss {
		out[i] = StreamInfo(s)
	}
	return out, nil
}

// MaxStreamEntries is the most entries one stream of a run holds
// (workflow.Stream): entries are numbered 1 to MaxStreamEntries.
const MaxStreamEntries = protocol.MaxStreamEntries

// streamAfter is the index a read from entry from starts after: from 1 or
// less reads from the first entry; from above MaxStreamEntries names no
// entry that can exist and is ErrInvalidArgument.
func streamAfter(name string, runID uuid.UUID, from int) (int, error) {
	if from > MaxStreamEntries {
		return 0, fmt.Errorf("read stream %q of %s: %w: entry %d is above the maximum %d (a stream holds at most %d entries)",
			protocol.Echo(name), runID, ErrInvalidArgument, from, MaxStreamEntries, MaxStreamEntries)
	}
	return max(from-1, 0), nil
}

func (c *Client) readStream(ctx context.Context, runID uuid.UUID, name string, after int) (store.StreamRead, error) {
	if runID == uuid.Nil {
		return store.StreamRead{}, fmt.Errorf("read stream: %w: run id is required", ErrInvalidArgument)
	}
	// The store's error says what it read, and of which run.
	return c.st.StepsStream(ctx, store.StepsStreamParams{Namespace: c.ns, RunID: runID, Name: name, After: after})
}

// RawStreamReader follows a run's stream live, entry by entry, as JSON
// (see ReadStream for the typed form). It is not safe for concurrent use.
type RawStreamReader struct {
	c     *Client
	runID uuid.UUID
	name  string
	after int
	last  int
	buf   []store.StreamEntry
	ended bool
	f     *follower
	err   error
}

// ReadStreamRaw returns a reader of the run's stream name from index from
// (1 or less: from the first entry; at most MaxStreamEntries). It subscribes to the run's progress
// before it returns, so it misses nothing written after; what was written
// before is read from Postgres. Close it when done (it closes itself at
// the end of the stream).
func (c *Client) ReadStreamRaw(ctx context.Context, runID uuid.UUID, name string, from int) *RawStreamReader {
	after, err := streamAfter(name, runID, from)
	r := &RawStreamReader{c: c, runID: runID, name: name, after: after, err: err}
	r.last = r.after
	if err == nil && c.nc != nil {
		r.f, r.err = c.follow(ctx, runID, true)
	}
	return r
}

// Next returns the next entry, waiting by push (never polling) until it is
// recorded. When the stream was closed or its run ended and every entry
// was returned, it returns io.EOF. An unknown run is ErrNotFound.
func (r *RawStreamReader) Next(ctx context.Context) (StreamEntry, error) {
	for {
		if len(r.buf) > 0 {
			e := r.buf[0]
			r.buf = r.buf[1:]
			r.last = e.Index
			return StreamEntry{Index: e.Index, Value: e.Value, RecordedAt: e.RecordedAt}, nil
		}
		if r.ended {
			return StreamEntry{}, io.EOF
		}
		if r.err != nil {
			return StreamEntry{}, r.err
		}
		resync := r.c.resyncChan()
		read, err := r.c.readStream(ctx, r.runID, r.name, r.after)
		if err != nil {
			if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				r.fail(err)
			}
			return StreamEntry{}, err
		}
		if n := len(read.Entries); n > 0 {
			r.buf = read.Entries
			r.after = read.Entries[n-1].Index
		}
		if read.Ended() {
			r.ended = true
			r.Close()
		}
		if len(r.buf) > 0 || r.ended || read.More {
			continue
		}
		if r.f == nil {
			r.fail(fmt.Errorf("read stream %q of %s: the client has no NATS connection to wait with", r.name, r.runID))
			continue
		}
		if err := r.f.wait(ctx, resync); err != nil {
			return StreamEntry{}, err
		}
	}
}

// Index is the index of the last entry Next returned (from-1 before the
// first): a reader that resumes later passes Index()+1 as from.
func (r *RawStreamReader) Index() int { return r.last }

func (r *RawStreamReader) fail(err error) {
	r.err = err
	r.Close()
}

// Close ends the reader's subscription; Next then returns what it already
// read and then io.EOF or the error that ended it. It is safe to call
// twice.
func (r *RawStreamReader) Close() {
	if r.f != nil {
		r.f.close()
		r.f = nil
	}
	if r.err == nil && !r.ended {
		r.err = errors.New("read stream: reader closed")
	}
}

// StreamReader follows a run's stream live, its entries decoded into T.
type StreamReader[T any] struct {
	raw *RawStreamReader
}

// ReadStream returns a reader of the run's stream s from index from (1 or
// less: from the first entry), subscribed before it returns: its Next
// returns every entry in order, waiting by push for those not written
// yet, then io.EOF once the stream is closed or its run ended. A reader
// that starts after the run ended reads every entry and then io.EOF.
func ReadStream[T any](ctx context.Context, c *Client, runID uuid.UUID, s workflow.Stream[T], from int) *StreamReader[T] {
	return &StreamReader[T]{raw: c.ReadStreamRaw(ctx, runID, s.Name(), from)}
}

// Next returns the next entry decoded into T (see RawStreamReader.Next).
func (r *StreamReader[T]) Next(ctx context.Context) (T, error) {
	var v T
	e, err := r.raw.Next(ctx)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(e.Value, &v); err != nil {
		var zero T
		return zero, fmt.Errorf("stream %q entry %d: does not decode into %T: %w", r.raw.name, e.Index, v, err)
	}
	return v, nil
}

// Index is the index of the last entry Next returned.
func (r *StreamReader[T]) Index() int { return r.raw.Index() }

// Close ends the reader's subscription (see RawStreamReader.Close).
func (r *StreamReader[T]) Close() { r.raw.Close() }
