package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// Each overlap policy through the real scheduler, dispatcher and worker: a
// schedule fires every 2 s a workflow that waits for an event the test
// sends, so each run outlives several fire times.
func TestScheduleOverlapPolicies(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: 1, concurrency: 50, register: func(w *worker.Worker) error {
		return worker.Register(w, "Blocker", func(ctx workflow.Context, _ struct{}) (string, error) {
			return workflow.WaitForEvent[string](ctx, "go", 0)
		})
	}})
	ctx := context.Background()
	const every = 2 * time.Second
	create := func(t *testing.T, p client.OverlapPolicy) *client.Schedule {
		t.Helper()
		sc, err := e.cl.CreateSchedule(ctx, "Blocker", nil, client.ScheduleOptions{Cron: "*/2 * * * * *", Overlap: p})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.cl.DeleteSchedule(context.Background(), sc.ID) })
		return sc
	}
	history := func(t *testing.T, id uuid.UUID) []client.Run {
		t.Helper()
		runs, err := e.cl.ScheduleHistory(ctx, id, 1000)
		if err != nil {
			t.Fatal(err)
		}
		// Oldest first.
		for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
			runs[i], runs[j] = runs[j], runs[i]
		}
		return runs
	}
	get := func(t *testing.T, id uuid.UUID) *client.Run {
		t.Helper()
		r, err := e.cl.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// passed waits until the schedule's next fire time is at least n fire
	// times after at: the scheduler has handled the ones between.
	passed := func(t *testing.T, id uuid.UUID, at time.Time, n int) *client.Schedule {
		t.Helper()
		var sc *client.Schedule
		waitUntil(t, time.Duration(n+5)*every, "the schedule to pass its fire times", func() bool {
			var err error
			if sc, err = e.cl.GetSchedule(ctx, id); err != nil {
				t.Fatal(err)
			}
			return sc.NextFireAt != nil && sc.NextFireAt.Sub(at) > time.Duration(n)*every
		})
		return sc
	}
	first := func(t *testing.T, id uuid.UUID) client.Run {
		t.Helper()
		var runs []client.Run
		waitUntil(t, 10*time.Second, "the first fire", func() bool { runs = history(t, id); return len(runs) > 0 })
		return runs[0]
	}
	live := func(r client.Run) bool {
		return r.Status == client.StatusPending || r.Status == client.StatusRunning || r.Status == client.StatusSleeping
	}

	t.Run("skip", func(t *testing.T) {
		t.Parallel()
		sc := create(t, client.OverlapSkip)
		a := first(t, sc.ID)
		passed(t, sc.ID, *a.ScheduleFireAt, 3)
		if runs := history(t, sc.ID); len(runs) != 1 {
			t.Fatalf("skip: %d runs while the first was live, want 1", len(runs))
		}
		ended := time.Now()
		if _, err := e.cl.SendEvent(ctx, a.ID, "go", "done"); err != nil {
			t.Fatal(err)
		}
		var runs []client.Run
		waitUntil(t, 10*time.Second, "a fire after the end", func() bool { runs = history(t, sc.ID); return len(runs) == 2 })
		if runs[1].ScheduleFireAt.Before(ended.Truncate(time.Second)) {
			t.Fatalf("skip: the second run is for %v, before the first ended at %v", runs[1].ScheduleFireAt, ended)
		}
	})

	t.Run("buffer-one", func(t *testing.T) {
		t.Parallel()
		sc := create(t, client.OverlapBufferOne)
		a := first(t, sc.ID)
		held := passed(t, sc.ID, *a.ScheduleFireAt, 3)
		if runs := history(t, sc.ID); len(runs) != 1 {
			t.Fatalf("buffer-one: %d runs while the first was live, want 1", len(runs))
		}
		want := a.ScheduleFireAt.Add(every)
		if held.BufferedFireAt == nil || !held.BufferedFireAt.Equal(want) {
			t.Fatalf("buffer-one: holds %v, want the fire after the first, %v", held.BufferedFireAt, want)
		}
		if _, err := e.cl.SendEvent(ctx, a.ID, "go", "done"); err != nil {
			t.Fatal(err)
		}
		var runs []client.Run
		waitUntil(t, 10*time.Second, "the held fire", func() bool { runs = history(t, sc.ID); return len(runs) >= 2 })
		if len(runs) != 2 || !runs[1].ScheduleFireAt.Equal(want) {
			t.Fatalf("buffer-one: after the end %d runs, the second for %v; want 2, %v", len(runs), runs[1].ScheduleFireAt, want)
		}
		// Started by the end, not by the next fire time.
		end := get(t, a.ID).FinishedAt
		if d := runs[1].CreatedAt.Sub(*end); d < 0 || d > time.Second {
			t.Fatalf("buffer-one: the held run started %v after the first ended", d)
		}
		if sc, _ := e.cl.GetSchedule(ctx, sc.ID); sc.BufferedFireAt != nil && !sc.BufferedFireAt.After(want) {
			t.Fatalf("buffer-one: still holds %v", sc.BufferedFireAt)
		}
	})

	t.Run("allow-all", func(t *testing.T) {
		t.Parallel()
		sc := create(t, client.OverlapAllowAll)
		a := first(t, sc.ID)
		passed(t, sc.ID, *a.ScheduleFireAt, 3)
		runs := history(t, sc.ID)
		if len(runs) < 3 {
			t.Fatalf("allow-all: %d runs, want one per fire", len(runs))
		}
		for i, r := range runs {
			if !r.ScheduleFireAt.Equal(a.ScheduleFireAt.Add(time.Duration(i) * every)) {
				t.Fatalf("allow-all: run %d for %v", i, r.ScheduleFireAt)
			}
		}
	})

	for _, p := range []client.OverlapPolicy{client.OverlapCancelOther, client.OverlapTerminateOther} {
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			sc := create(t, p)
			a := first(t, sc.ID)
			var runs []client.Run
			waitUntil(t, 10*time.Second, "the second fire", func() bool { runs = history(t, sc.ID); return len(runs) >= 2 })
			prev, err := e.cl.Wait(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if prev.Status != client.StatusCancelled {
				t.Fatalf("%s: the previous run ended %s (%s), want CANCELLED", p, prev.Status, prev.Error)
			}
			if p == client.OverlapTerminateOther && !strings.Contains(prev.Error, store.TerminatedError) {
				t.Fatalf("terminate-other: the previous run's error %q", prev.Error)
			}
			if !runs[1].ScheduleFireAt.Equal(a.ScheduleFireAt.Add(every)) {
				t.Fatalf("%s: the second run for %v", p, runs[1].ScheduleFireAt)
			}
			// Once the policy has acted, one run is live and not asked to
			// cancel: terminate-other ends the previous run in the fire's
			// transaction; cancel-other asks it to cancel there and starts
			// the new one at once, so the previous may still be winding down.
			passed(t, sc.ID, *runs[1].ScheduleFireAt, 1)
			n := 0
			for _, r := range history(t, sc.ID) {
				if g := get(t, r.ID); live(*g) && (p == client.OverlapTerminateOther || g.CancelRequestedAt == nil) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%s: %d runs live (and not asked to cancel), want 1", p, n)
			}
		})
	}
}

// A backfill through the client starts exactly the fire times of the range
// with no run, once; jitter delays each fired run within [fire, fire+jitter)
// and keeps the nominal fire time.
func TestScheduleBackfillAndJitter(t *testing.T) {
	t.Parallel()
	e := start(t, opts{workers: -1})
	ctx := context.Background()

	sc, err := e.cl.CreateSchedule(ctx, "Hourly", nil, client.ScheduleOptions{Cron: "0 * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	to := time.Now().UTC().Truncate(time.Hour)
	from := to.Add(-4 * time.Hour)
	r, err := e.cl.BackfillSchedule(ctx, sc.ID, from, to, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Runs) != 4 {
		t.Fatalf("backfill started %d runs, want 4", len(r.Runs))
	}
	hist, err := e.cl.ScheduleHistory(ctx, sc.ID, 100)
	if err != nil || len(hist) != 4 {
		t.Fatalf("history %d %v", len(hist), err)
	}
	for i, run := range hist {
		if want := to.Add(-time.Duration(i+1) * time.Hour); !run.ScheduleFireAt.Equal(want) {
			t.Fatalf("history %d fired for %v, want %v", i, run.ScheduleFireAt, want)
		}
	}
	r, err = e.cl.BackfillSchedule(ctx, sc.ID, from, to, "")
	if err != nil || len(r.Runs) != 0 || len(r.Existing) != 4 {
		t.Fatalf("repeated backfill: %+v %v", r, err)
	}

	// No worker serves Jittery: its runs stay pending with their due time.
	const jitter = 3 * time.Second
	js, err := e.cl.CreateSchedule(ctx, "Jittery", nil, client.ScheduleOptions{Cron: "* * * * * *", Jitter: jitter})
	if err != nil {
		t.Fatal(err)
	}
	var runs []client.Run
	waitUntil(t, 15*time.Second, "five jittered fires", func() bool {
		if runs, err = e.cl.ScheduleHistory(ctx, js.ID, 100); err != nil {
			t.Fatal(err)
		}
		return len(runs) >= 5
	})
	if _, err := e.cl.PauseSchedule(ctx, js.ID); err != nil {
		t.Fatal(err)
	}
	distinct := map[time.Duration]bool{}
	for _, run := range runs {
		fire := *run.ScheduleFireAt
		if fire.Truncate(time.Second) != fire {
			t.Fatalf("fire time %v is not the nominal one", fire)
		}
		// Its own delay, or its creation if the fire was later than that
		// (both are the statement's now()).
		d, want := run.AvailableAt.Sub(fire), max(store.JitterDelay(js.ID, fire, jitter), run.CreatedAt.Sub(fire))
		if d < 0 || d >= jitter || d != want {
			t.Fatalf("run for %v available %v after it, want %v: the schedule's delay in [0, %v)", fire, d, want, jitter)
		}
		distinct[d] = true
	}
	if len(distinct) < 2 {
		t.Fatalf("every run got the same delay: %v", distinct)
	}
}
