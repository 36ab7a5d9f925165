package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// steady is a steady load for the tests of a process or node that freezes
// under it: runs of a three-step workflow ("Steps") started at a fixed
// rate, each step's start time and executions recorded, so that a test can
// measure the longest pause in step starts across a fault.
type steady struct {
	mu     sync.Mutex
	starts []time.Time     // of every step function
	steps  map[string]int  // executions by run and step
	runs   []steadyStarted // in start order
}

// steadyStarted is one run the load started.
type steadyStarted struct {
	at time.Time
	h  *client.Handle
}

func newSteady() *steady { return &steady{steps: map[string]int{}} }

// register registers the "Steps" workflow on w.
func (s *steady) register(w *worker.Worker) error {
	return worker.Register(w, "Steps", func(ctx workflow.Context, _ int) (int, error) {
		for i := range 3 {
			if _, err := workflow.Step(ctx, fmt.Sprintf("s%d", i), func(context.Context) (int, error) {
				s.mu.Lock()
				s.starts = append(s.starts, time.Now())
				s.steps[fmt.Sprintf("%s/%d", ctx.RunID(), i)]++
				s.mu.Unlock()
				return i, nil
			}); err != nil {
				return 0, err
			}
		}
		return 0, nil
	})
}

// startFor starts rate runs per second through cl for d.
func (s *steady) startFor(t *testing.T, ctx context.Context, cl *client.Client, rate int, d time.Duration) {
	t.Helper()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	for now := time.Now(); now.Before(end); now = <-tick.C {
		h, err := cl.Start(ctx, "Steps", 0, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.runs = append(s.runs, steadyStarted{at: time.Now(), h: h})
	}
}

// check waits for every run's result, fails t for a step that ran more
// than once or a run that lacks one, and returns the longest pause in step
// starts between from and to (from to the first start after it, to the
// last start before to, and every gap in between).
func (s *steady) check(t *testing.T, from, to time.Time) time.Duration {
	t.Helper()
	for _, r := range s.runs {
		if _, err := result[int](t, r.h, time.Minute); err != nil {
			t.Fatalf("run %s: %v", r.h.RunID, err)
		}
	}
	s.mu.Lock()
	times := slices.Clone(s.starts)
	for k, n := range s.steps {
		if n != 1 {
			t.Errorf("step %s ran %d times", k, n)
		}
	}
	if len(s.steps) != 3*len(s.runs) {
		t.Errorf("%d steps ran for %d runs of 3", len(s.steps), len(s.runs))
	}
	s.mu.Unlock()
	slices.SortFunc(times, func(x, y time.Time) int { return x.Compare(y) })
	last, pause := from, time.Duration(0)
	for _, at := range times {
		if at.Before(from) {
			continue
		}
		if at.After(to) {
			at = to
		}
		pause = max(pause, at.Sub(last))
		last = at
		if !at.Before(to) {
			break
		}
	}
	return pause
}
