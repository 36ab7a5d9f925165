package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

var (
	progressState = workflow.NewState[int]("progress")
	tokenStream   = workflow.NewStream[string]("tokens")
	logStream     = workflow.NewStream[string]("log")
)

// progressFlow registers "Progress": it sets the state "progress" to 1,
// 2, 3 with event waits between (so the test reads the state while the
// run waits), writes five tokens and one log line between the first and
// second wait, and closes the token stream (not the log) at the end.
// writes counts the executions of the token loop's Writes: the second
// wait's wakeup replays them.
func progressFlow(writes *atomic.Int32) func(*worker.Worker) error {
	return func(w *worker.Worker) error {
		return worker.Register(w, "Progress", func(ctx workflow.Context, _ struct{}) (string, error) {
			if err := progressState.Set(ctx, 1); err != nil {
				return "", err
			}
			if _, err := workflow.WaitForEvent[string](ctx, "go", 0); err != nil {
				return "", err
			}
			if err := progressState.Set(ctx, 2); err != nil {
				return "", err
			}
			for i := 1; i <= 5; i++ {
				writes.Add(1)
				if err := tokenStream.Write(ctx, fmt.Sprintf("t%d", i)); err != nil {
					return "", err
				}
			}
			if err := logStream.Write(ctx, "started"); err != nil {
				return "", err
			}
			if _, err := workflow.WaitForEvent[string](ctx, "finish", 0); err != nil {
				return "", err
			}
			if err := progressState.Set(ctx, 3); err != nil {
				return "", err
			}
			if err := tokenStream.Close(ctx); err != nil {
				return "", err
			}
			return "done", nil
		})
	}
}

// readAll reads a stream reader to its end, within a deadline.
func readAll(t *testing.T, r *client.StreamReader[string]) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []string
	for {
		v, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, v)
	}
}

func TestStateAndStreams(t *testing.T) {
	t.Parallel()
	var writes atomic.Int32
	e := start(t, opts{dispatchers: 1, workers: 1, register: progressFlow(&writes)})
	ctx := context.Background()
	h, err := e.cl.Start(ctx, "Progress", struct{}{}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := client.GetState(ctx, e.cl, uuid.New(), progressState); !errors.Is(err, client.ErrNotFound) || ok {
		t.Fatalf("state of an unknown run: %v %v", ok, err)
	}

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, version, err := client.WaitState(wctx, e.cl, h.RunID, progressState, 0)
	if err != nil || v != 1 || version != 1 {
		t.Fatalf("first state: %d v%d %v", v, version, err)
	}
	waitStatus(t, e, h.RunID, client.StatusSleeping)
	v, ok, err := client.GetState(ctx, e.cl, h.RunID, progressState)
	if err != nil || !ok || v != 1 {
		t.Fatalf("state while the run waits: %d %v %v", v, ok, err)
	}
	if raw, version, err := e.cl.StateGet(ctx, h.RunID, "progress"); err != nil || string(raw) != "1" || version != 1 {
		t.Fatalf("raw state: %s v%d %v", raw, version, err)
	}
	if _, version, err := e.cl.StateGet(ctx, h.RunID, "never"); err != nil || version != 0 {
		t.Fatalf("a key never set: v%d %v", version, err)
	}

	// A reader started before any write, and a state waiter, both woken
	// by push.
	early := client.ReadStream(ctx, e.cl, h.RunID, tokenStream, 0)
	defer early.Close()
	type waited struct {
		v, version int
		err        error
	}
	next := make(chan waited, 1)
	go func() {
		v, version, err := client.WaitState(wctx, e.cl, h.RunID, progressState, 1)
		next <- waited{v, version, err}
	}()
	if _, err := e.cl.SendEvent(ctx, h.RunID, "go", "x"); err != nil {
		t.Fatal(err)
	}
	// The run waits for "finish" before it sets 3: the waiter sees 2.
	if w := <-next; w.err != nil || w.v != 2 || w.version != 2 {
		t.Fatalf("waited state: %+v", w)
	}
	for i := 1; i <= 5; i++ {
		got, err := early.Next(wctx)
		if err != nil || got != fmt.Sprintf("t%d", i) || early.Index() != i {
			t.Fatalf("early reader entry %d: %q (index %d) %v", i, got, early.Index(), err)
		}
	}
	// The stream is open and the run goes on: the next read waits until
	// the close.
	end := make(chan error, 1)
	go func() {
		_, err := early.Next(wctx)
		end <- err
	}()
	// Suspended, so that the event's wakeup replays the run.
	waitStatus(t, e, h.RunID, client.StatusSleeping)
	if _, err := e.cl.SendEvent(ctx, h.RunID, "finish", "x"); err != nil {
		t.Fatal(err)
	}
	if err := <-end; !errors.Is(err, io.EOF) {
		t.Fatalf("early reader after the close: %v", err)
	}
	var out string
	if err := h.Result(ctx, &out); err != nil || out != "done" {
		t.Fatalf("result %q %v", out, err)
	}

	// Readers that start after the run ended read everything, then EOF;
	// the log stream was never closed and ended with its run.
	if got := readAll(t, client.ReadStream(ctx, e.cl, h.RunID, tokenStream, 0)); strings.Join(got, ",") != "t1,t2,t3,t4,t5" {
		t.Fatalf("late reader: %q", got)
	}
	if got := readAll(t, client.ReadStream(ctx, e.cl, h.RunID, tokenStream, 4)); strings.Join(got, ",") != "t4,t5" {
		t.Fatalf("late reader from 4: %q", got)
	}
	if got := readAll(t, client.ReadStream(ctx, e.cl, h.RunID, logStream, 0)); strings.Join(got, ",") != "started" {
		t.Fatalf("unclosed stream of a finished run: %q", got)
	}
	entries, ended, err := e.cl.StreamEntries(ctx, h.RunID, "tokens", 2)
	if err != nil || !ended || len(entries) != 4 || entries[0].Index != 2 || string(entries[3].Value) != `"t5"` {
		t.Fatalf("entries from 2: %+v %v %v", entries, ended, err)
	}
	if _, version, err := client.WaitState(wctx, e.cl, h.RunID, progressState, 3); !errors.Is(err, client.ErrRunFinished) || version != 0 {
		t.Fatalf("waiting past the last version of a finished run: v%d %v", version, err)
	}
	states, err := e.cl.StateList(ctx, h.RunID)
	if err != nil || len(states) != 1 || states[0].Key != "progress" || states[0].Version != 3 || string(states[0].Value) != "3" {
		t.Fatalf("state list: %+v %v", states, err)
	}

	// The wakeup after "finish" replayed the Writes: the loop ran twice,
	// the entries were recorded once.
	if n := writes.Load(); n != 10 {
		t.Fatalf("the token loop made %d Write calls, want 10 (one execution and one replay)", n)
	}
	steps, err := e.srv.Store.StepsList(ctx, "default", h.RunID)
	if err != nil {
		t.Fatal(err)
	}
	recorded := 0
	for _, s := range steps {
		if strings.HasPrefix(s.StepID, "stream:tokens#") {
			recorded++
		}
	}
	if recorded != 6 {
		t.Fatalf("%d token stream steps recorded, want 5 entries and the close", recorded)
	}
}
