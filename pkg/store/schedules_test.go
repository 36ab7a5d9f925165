package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// t0 is a fixed instant schedules start from, far from the wall clock so
// tests do not depend on it.
var t0 = time.Date(2030, 1, 15, 10, 0, 0, 0, time.UTC)

func createSchedule(t *testing.T, s *store.Store, p store.SchedulesCreateParams) store.Schedule {
	t.Helper()
	if p.Namespace == "" {
		p.Namespace = "ns"
	}
	if p.Queue == "" {
		p.Queue = "q"
	}
	if p.Type == "" {
		p.Type = "Report"
	}
	if p.Now.IsZero() {
		p.Now = t0
	}
	sc, err := s.SchedulesCreate(context.Background(), p)
	if err != nil {
		t.Fatalf("create schedule: %v", err)
	}
	return sc
}

func TestSchedulesCreateAndGet(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	pol := &retry.Policy{MaxAttempts: 3}
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "*/15 * * * *", Input: []byte(`{"k":1}`), Version: "v3",
		MaxCatchup: 2, RetryPolicy: pol})
	// Strictly after Now: t0 itself is a tick.
	if sc.NextFireAt == nil || !sc.NextFireAt.Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("next fire %v, want %v", sc.NextFireAt, t0.Add(15*time.Minute))
	}
	if sc.Status != store.StatusScheduled || sc.Timezone != "UTC" || sc.Cron != "*/15 * * * *" || sc.MaxCatchup != 2 ||
		sc.Version != "v3" || sc.LastFiredAt != nil || sc.RetryPolicy == nil || sc.RetryPolicy.MaxAttempts != 3 || sc.ID.Version() != 7 {
		t.Fatalf("created: %+v", sc)
	}
	got, err := s.SchedulesGet(ctx, "ns", sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Input) != `{"k":1}` || got.Queue != "q" || got.Type != "Report" || !got.NextFireAt.Equal(*sc.NextFireAt) ||
		got.RetryPolicy == nil || got.RetryPolicy.MaxAttempts != 3 {
		t.Fatalf("get: %+v", got)
	}
	// A schedule is not a run, and a run is not a schedule.
	l, _ := leasedRun(t, s, "ns")
	if _, err := s.SchedulesGet(ctx, "ns", l.RunID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get a run as a schedule: %v", err)
	}
	if _, err := s.SchedulesCreate(ctx, store.SchedulesCreateParams{ScheduleID: sc.ID, Namespace: "ns", Queue: "q", Type: "T",
		Cron: "@daily", Now: t0}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate id: want ErrConflict, got %v", err)
	}
}

func TestSchedulesInvalidCronRejected(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	for _, c := range []struct{ expr, problem string }{
		{"61 * * * *", "out of bounds"},
		{"a b c", "5-7 segments"},
		{"* * * *", "5-7 segments"},
		{"*/0 * * * *", "step can't be 0"},
		{"5,,6 * * * *", "minute"},
		{"0 0 30 2 *", "no fire time"},
		{"0 0 1 1 * 2020", "no fire time"},
	} {
		_, err := s.SchedulesCreate(ctx, store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "T", Cron: c.expr, Now: t0})
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%q: want ErrInvalidArgument, got %v", c.expr, err)
			continue
		}
		if !strings.Contains(err.Error(), c.expr) || !strings.Contains(err.Error(), c.problem) {
			t.Errorf("%q: message %q should name the expression and %q", c.expr, err, c.problem)
		}
	}
	if _, err := s.SchedulesCreate(ctx, store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "T", Cron: "", Now: t0}); !errors.Is(
		err,
		store.ErrInvalidArgument,
	) {
		t.Errorf("empty cron: %v", err)
	}
	if err := store.ParseCron("@hourly"); err != nil {
		t.Errorf("tag: %v", err)
	}
	list, _, err := s.SchedulesList(ctx, store.SchedulesListParams{Namespace: "ns"})
	if err != nil || len(list) != 0 {
		t.Fatalf("rejected schedules were stored: %+v %v", list, err)
	}
}

func TestSchedulesCreateValidation(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := withLimits(t, store.New(pool, store.Options{}), 8, 8)
	ctx := context.Background()
	base := store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "T", Cron: "@hourly", Now: t0}
	cases := []struct {
		name, field string
		want        error
		edit        func(p *store.SchedulesCreateParams)
	}{
		{"unknown zone", "Mars/Olympus_Mons", store.ErrInvalidArgument, func(p *store.SchedulesCreateParams) { p.Timezone = "Mars/Olympus_Mons" }},
		{"local zone", "Local", store.ErrInvalidArgument, func(p *store.SchedulesCreateParams) { p.Timezone = "Local" }},
		{"negative catch-up", "catch-up", store.ErrInvalidArgument, func(p *store.SchedulesCreateParams) { p.MaxCatchup = -1 }},
		{"huge catch-up", "catch-up", store.ErrInvalidArgument, func(p *store.SchedulesCreateParams) { p.MaxCatchup = store.MaxCatchupLimit + 1 }},
		{"no queue", "queue", store.ErrInvalidArgument, func(p *store.SchedulesCreateParams) { p.Queue = "" }},
		{"no type", "workflow type", store.ErrInvalidArgument, func(p *store.SchedulesCreateParams) { p.Type = "" }},
		{
			"bad policy",
			"backoff",
			store.ErrInvalidArgument,
			func(p *store.SchedulesCreateParams) { p.RetryPolicy = &retry.Policy{BackoffCoefficient: 0.5} },
		},
		{"big input", "input", store.ErrPayloadTooLarge, func(p *store.SchedulesCreateParams) { p.Input = []byte("123456789") }},
	}
	for _, c := range cases {
		p := base
		c.edit(&p)
		_, err := s.SchedulesCreate(ctx, p)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: want %v naming %q, got %v", c.name, c.want, c.field, err)
		}
	}
	list, _, _ := s.SchedulesList(ctx, store.SchedulesListParams{Namespace: "ns"})
	if len(list) != 0 {
		t.Fatalf("rejected schedules were stored: %+v", list)
	}
}

func TestSchedulesTimezone(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	winter := createSchedule(t, s, store.SchedulesCreateParams{Cron: "0 9 * * *", Timezone: "America/New_York", Now: t0})
	if want := time.Date(2030, 1, 15, 14, 0, 0, 0, time.UTC); !winter.NextFireAt.Equal(want) || winter.Timezone != "America/New_York" {
		t.Fatalf("EST: next %v, want %v", winter.NextFireAt, want)
	}
	summer := createSchedule(t, s, store.SchedulesCreateParams{Cron: "0 9 * * *", Timezone: "America/New_York",
		Now: time.Date(2030, 7, 15, 0, 0, 0, 0, time.UTC)})
	if want := time.Date(2030, 7, 15, 13, 0, 0, 0, time.UTC); !summer.NextFireAt.Equal(want) {
		t.Fatalf("EDT: next %v, want %v", summer.NextFireAt, want)
	}
}

func TestSchedulesSixFieldSeconds(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "*/10 * * * * *", Now: t0.Add(3 * time.Second)})
	if want := t0.Add(10 * time.Second); !sc.NextFireAt.Equal(want) {
		t.Fatalf("next %v, want %v", sc.NextFireAt, want)
	}
	next, err := store.NextFireTime(sc.Cron, sc.Timezone, *sc.NextFireAt)
	if err != nil || !next.Equal(t0.Add(20*time.Second)) {
		t.Fatalf("following fire %v %v", next, err)
	}
	run, fired, err := s.SchedulesFire(ctx, store.SchedulesFireParams{Namespace: "ns", ScheduleID: sc.ID, FireAt: *sc.NextFireAt, Next: next})
	if err != nil || !fired || !run.ScheduleFireAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("fire: %+v %v %v", run, fired, err)
	}
	got, _ := s.SchedulesGet(ctx, "ns", sc.ID)
	if !got.NextFireAt.Equal(t0.Add(20*time.Second)) || !got.LastFiredAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("after fire: %+v", got)
	}
}

func TestSchedulesFireTwiceCreatesOneInstance(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	pol := &retry.Policy{MaxAttempts: 7}
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "@hourly", Input: []byte("in"), Version: "v2", RetryPolicy: pol})
	fireAt := *sc.NextFireAt
	next := fireAt.Add(time.Hour)
	p := store.SchedulesFireParams{Namespace: "ns", ScheduleID: sc.ID, FireAt: fireAt, Next: &next, TraceContext: "00-abc-def-01"}
	run, fired, err := s.SchedulesFire(ctx, p)
	if err != nil || !fired {
		t.Fatalf("first fire: %v %v", fired, err)
	}
	if run.ScheduleID == nil || *run.ScheduleID != sc.ID || !run.ScheduleFireAt.Equal(fireAt) || run.Status != store.StatusPending ||
		run.Queue != "q" || run.Type != "Report" || run.Version != "v2" || run.TraceContext != "00-abc-def-01" ||
		run.RetryPolicy == nil || run.RetryPolicy.MaxAttempts != 7 || run.AvailableAt == nil || run.AvailableAt.After(time.Now()) {
		t.Fatalf("instance: %+v", run)
	}
	full, err := s.RunsGet(ctx, "ns", run.ID)
	if err != nil || string(full.Input) != "in" {
		t.Fatalf("instance input: %q %v", full.Input, err)
	}
	again, fired, err := s.SchedulesFire(ctx, p)
	if err != nil || fired || again.ID != run.ID {
		t.Fatalf("second fire: fired=%v run=%s err=%v, want the first instance %s", fired, again.ID, err, run.ID)
	}
	hist, err := s.SchedulesHistory(ctx, "ns", sc.ID, 10)
	if err != nil || len(hist) != 1 {
		t.Fatalf("history: %+v %v", hist, err)
	}
	got, _ := s.SchedulesGet(ctx, "ns", sc.ID)
	if !got.NextFireAt.Equal(next) || !got.LastFiredAt.Equal(fireAt) {
		t.Fatalf("template: %+v", got)
	}
}

func TestSchedulesFireRacingGoroutinesCreateOneInstance(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	for round := 0; round < 3; round++ {
		sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "* * * * *"})
		fireAt := *sc.NextFireAt
		next := fireAt.Add(time.Minute)
		const n = 8
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			runs  = make([]store.Run, n)
			fired = make([]bool, n)
			errs  = make([]error, n)
		)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				runs[i], fired[i], errs[i] = s.SchedulesFire(
					ctx,
					store.SchedulesFireParams{Namespace: "ns", ScheduleID: sc.ID, FireAt: fireAt, Next: &next},
				)
			}()
		}
		close(start)
		wg.Wait()
		winners := 0
		for i := 0; i < n; i++ {
			if errs[i] != nil {
				t.Fatalf("round %d goroutine %d: %v", round, i, errs[i])
			}
			if fired[i] {
				winners++
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d goroutines fired, want 1", round, winners)
		}
		for i := 0; i < n; i++ {
			if runs[i].ID != runs[0].ID {
				t.Fatalf("round %d: goroutines saw different instances %s and %s", round, runs[i].ID, runs[0].ID)
			}
		}
		hist, err := s.SchedulesHistory(ctx, "ns", sc.ID, 100)
		if err != nil || len(hist) != 1 {
			t.Fatalf("round %d: history %d runs (%v), want 1", round, len(hist), err)
		}
	}
}

func TestSchedulesFireRacingDueFromManySchedulers(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "* * * * *", MaxCatchup: 3})
	now := t0.Add(10*time.Minute + 30*time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs, _, err := s.SchedulesFireDue(ctx, sc, now, 10*time.Second, "")
			if err != nil {
				t.Errorf("fire due: %v", err)
			}
			mu.Lock()
			total += len(runs)
			mu.Unlock()
		}()
	}
	wg.Wait()
	// 10:01 to 10:10 were all missed (10:10 by 30 s, more than a 10 s
	// catch-up window): the 3 most recent fire.
	if total != 3 {
		t.Fatalf("%d runs created, want 3", total)
	}
	hist, err := s.SchedulesHistory(ctx, "ns", sc.ID, 100)
	if err != nil || len(hist) != 3 {
		t.Fatalf("history: %d %v", len(hist), err)
	}
	for i, want := range []time.Duration{10, 9, 8} {
		if !hist[i].ScheduleFireAt.Equal(t0.Add(want * time.Minute)) {
			t.Fatalf("history[%d] fired for %v, want %v", i, hist[i].ScheduleFireAt, t0.Add(want*time.Minute))
		}
	}
	got, _ := s.SchedulesGet(ctx, "ns", sc.ID)
	if !got.NextFireAt.Equal(t0.Add(11*time.Minute)) || !got.LastFiredAt.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("template after catch-up: %+v", got)
	}
	// Not due any more: nothing to do.
	if runs, advanced, err := s.SchedulesFireDue(ctx, got, now, 0, ""); err != nil || len(runs) != 0 || advanced {
		t.Fatalf("fire a schedule that is not due: %v %v %v", runs, advanced, err)
	}
}

func TestCatchUp(t *testing.T) {
	t.Parallel()
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	m := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Minute) }
	cases := []struct {
		name       string
		cron       string
		lastDue    time.Time
		now        time.Time
		maxCatchup int
		grace      time.Duration
		fire       []time.Time
		next       time.Time
	}{
		{"on time", "0 * * * *", h(0), h(0).Add(50 * time.Millisecond), 0, 0, []time.Time{h(0)}, h(1)},
		{"late within the window", "0 * * * *", h(0), h(0).Add(4 * time.Minute), 0, 0, []time.Time{h(0)}, h(1)},
		{"exactly the window late", "0 * * * *", h(0), h(0).Add(store.DefaultCatchUpWindow), 0, 0, []time.Time{h(0)}, h(1)},
		{"missed by more than the window", "0 * * * *", h(0), h(0).Add(store.DefaultCatchUpWindow + time.Second), 0, 0, nil, h(1)},
		{"missed, caught up", "0 * * * *", h(0), h(0).Add(store.DefaultCatchUpWindow + time.Second), 1, 0, []time.Time{h(0)}, h(1)},
		{"a custom window", "0 * * * *", h(0), h(0).Add(time.Minute), 0, 2 * time.Minute, []time.Time{h(0)}, h(1)},
		{"missed by more than a custom window", "0 * * * *", h(0), h(0).Add(11 * time.Second), 0, 10 * time.Second, nil, h(1)},
		{"late, no catch-up", "0 * * * *", h(0), h(3).Add(20 * time.Minute), 0, 0, nil, h(4)},
		{"late, bounded catch-up", "0 * * * *", h(0), h(3).Add(20 * time.Minute), 2, 0, []time.Time{h(2), h(3)}, h(4)},
		{"late, catch-up above the misses", "0 * * * *", h(0), h(3).Add(20 * time.Minute), 10, 0, []time.Time{h(0), h(1), h(2), h(3)}, h(4)},
		{"exactly at a tick", "0 * * * *", h(0), h(2), 10, 0, []time.Time{h(0), h(1), h(2)}, h(3)},
		{"exactly at a tick, no catch-up", "0 * * * *", h(0), h(2), 0, 0, []time.Time{h(2)}, h(3)},
		{"not due yet", "0 * * * *", h(2), h(1), 3, 0, nil, h(2)},
		// The scheduler's case: 20 times missed, then back; the last 5 are
		// within the window.
		{"20 due, catch-up 3", "* * * * *", m(1), m(20).Add(30 * time.Second), 3, 0,
			[]time.Time{m(13), m(14), m(15), m(16), m(17), m(18), m(19), m(20)}, m(21)},
		{"20 due, catch-up 0", "* * * * *", m(1), m(20).Add(30 * time.Second), 0, 0,
			[]time.Time{m(16), m(17), m(18), m(19), m(20)}, m(21)},
		{"20 due, a short window", "* * * * *", m(1), m(20).Add(30 * time.Second), 3, 10 * time.Second,
			[]time.Time{m(18), m(19), m(20)}, m(21)},
		// Every due time within the window fires, besides the catch-up.
		{"seconds, back 3 s late", "* * * * * *", t0.Add(time.Second), t0.Add(5 * time.Second), 0, 0,
			[]time.Time{t0.Add(time.Second), t0.Add(2 * time.Second), t0.Add(3 * time.Second), t0.Add(4 * time.Second), t0.Add(5 * time.Second)},
			t0.Add(6 * time.Second)},
		{"seconds, back 20 s late", "* * * * * *", t0.Add(time.Second), t0.Add(20*time.Second + 500*time.Millisecond), 2, 5 * time.Second,
			[]time.Time{t0.Add(14 * time.Second), t0.Add(15 * time.Second), t0.Add(16 * time.Second), t0.Add(17 * time.Second),
				t0.Add(18 * time.Second), t0.Add(19 * time.Second), t0.Add(20 * time.Second)},
			t0.Add(21 * time.Second)},
	}
	for _, c := range cases {
		fire, next, err := store.CatchUp(c.cron, "", c.lastDue, c.now, c.maxCatchup, c.grace)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(fire) != len(c.fire) {
			t.Fatalf("%s: fire %v, want %v", c.name, fire, c.fire)
		}
		for i := range fire {
			if !fire[i].Equal(c.fire[i]) {
				t.Fatalf("%s: fire %v, want %v", c.name, fire, c.fire)
			}
		}
		if next == nil || !next.Equal(c.next) {
			t.Fatalf("%s: next %v, want %v", c.name, next, c.next)
		}
	}
	// A schedule firing every second, back after a 4-minute outage: 240
	// due times within the window, of which the last 100 fire (and
	// max_catchup more before them).
	back := t0.Add(4 * time.Minute)
	for _, maxCatchup := range []int{0, 2} {
		fire, next, err := store.CatchUp("* * * * * *", "", t0.Add(time.Second), back, maxCatchup, 0)
		if err != nil || next == nil || !next.Equal(back.Add(time.Second)) {
			t.Fatalf("every second after 4 min: next %v %v", next, err)
		}
		want := store.MaxWindowFires + maxCatchup
		if len(fire) != want || !fire[0].Equal(back.Add(-time.Duration(want-1)*time.Second)) || !fire[len(fire)-1].Equal(back) {
			t.Fatalf("every second after 4 min, catch-up %d: fired %d times from %v to %v, want the last %d",
				maxCatchup, len(fire), fire[0], fire[len(fire)-1], want)
		}
	}
	if _, _, err := store.CatchUp("nope", "", h(0), h(1), 1, 0); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("bad cron: %v", err)
	}
	if _, _, err := store.CatchUp("@hourly", "", h(0), h(1), -1, 0); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("negative catch-up: %v", err)
	}
	// A cron with no time after now: the last fire, and no next.
	fire, next, err := store.CatchUp("0 12 15 1 * 2030", "", t0.Add(2*time.Hour), t0.Add(2*time.Hour+time.Second), 0, 0)
	if err != nil || len(fire) != 1 || !fire[0].Equal(t0.Add(2*time.Hour)) || next != nil {
		t.Fatalf("last fire: %v %v %v", fire, next, err)
	}
	// Its last time missed with no catch-up: nothing fires, and no next.
	fire, next, err = store.CatchUp("0 12 15 1 * 2030", "", t0.Add(2*time.Hour), t0.Add(3*time.Hour), 0, 0)
	if err != nil || len(fire) != 0 || next != nil {
		t.Fatalf("last fire missed: %v %v %v", fire, next, err)
	}
}

func TestSchedulesFireLastTimePauses(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "0 12 15 1 * 2030"})
	if !sc.NextFireAt.Equal(t0.Add(2 * time.Hour)) {
		t.Fatalf("next %v", sc.NextFireAt)
	}
	runs, advanced, err := s.SchedulesFireDue(ctx, sc, t0.Add(2*time.Hour+time.Second), 0, "")
	if err != nil || len(runs) != 1 || !advanced {
		t.Fatalf("last fire: %v %v", runs, err)
	}
	got, _ := s.SchedulesGet(ctx, "ns", sc.ID)
	if got.Status != store.StatusPaused || got.NextFireAt != nil || !got.LastFiredAt.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("after its last fire: %+v", got)
	}
	if due, _ := s.SchedulesDue(ctx, t0.Add(1000*time.Hour), 10); len(due) != 0 {
		t.Fatalf("exhausted schedule is due: %+v", due)
	}
	if _, err := s.SchedulesResume(ctx, "ns", sc.ID, t0.Add(3*time.Hour)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("resume an exhausted schedule: want ErrConflict, got %v", err)
	}
}

func TestSchedulesPauseResumeSkipsMissed(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "*/5 * * * *", MaxCatchup: 10})
	oldNext := *sc.NextFireAt
	p, err := s.SchedulesPause(ctx, "ns", sc.ID)
	if err != nil || p.Status != store.StatusPaused || p.NextFireAt != nil {
		t.Fatalf("pause: %+v %v", p, err)
	}
	if p, err := s.SchedulesPause(ctx, "ns", sc.ID); err != nil || p.Status != store.StatusPaused {
		t.Fatalf("pause again: %+v %v", p, err)
	}
	if due, _ := s.SchedulesDue(ctx, t0.Add(time.Hour), 10); len(due) != 0 {
		t.Fatalf("paused schedule is due: %+v", due)
	}
	next := oldNext.Add(5 * time.Minute)
	if _, fired, err := s.SchedulesFire(ctx, store.SchedulesFireParams{Namespace: "ns", ScheduleID: sc.ID, FireAt: oldNext, Next: &next}); err != nil ||
		fired {
		t.Fatalf("fire while paused: fired=%v %v", fired, err)
	}
	resumeAt := t0.Add(time.Hour + 2*time.Minute)
	r, err := s.SchedulesResume(ctx, "ns", sc.ID, resumeAt)
	if err != nil {
		t.Fatal(err)
	}
	if want := t0.Add(time.Hour + 5*time.Minute); r.Status != store.StatusScheduled || !r.NextFireAt.Equal(want) {
		t.Fatalf("resume: %+v, want next %v", r, want)
	}
	// The missed times are gone: a scheduler at resume time has nothing to do.
	if runs, _, err := s.SchedulesFireDue(ctx, r, resumeAt, 0, ""); err != nil || len(runs) != 0 {
		t.Fatalf("fired missed times after resume: %v %v", runs, err)
	}
	if r2, err := s.SchedulesResume(ctx, "ns", sc.ID, resumeAt.Add(time.Hour)); err != nil || !r2.NextFireAt.Equal(*r.NextFireAt) {
		t.Fatalf("resume a running schedule moved it: %+v %v", r2, err)
	}
	if hist, _ := s.SchedulesHistory(ctx, "ns", sc.ID, 10); len(hist) != 0 {
		t.Fatalf("history: %+v", hist)
	}
}

func TestSchedulesDeleteKeepsFiredRuns(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "@hourly", Input: []byte(`{"a":1}`)})
	runs, _, err := s.SchedulesFireDue(ctx, sc, *sc.NextFireAt, 0, "")
	if err != nil || len(runs) != 1 {
		t.Fatalf("fire: %v %v", runs, err)
	}
	if err := s.SchedulesDelete(ctx, "ns", sc.ID); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunsGet(ctx, "ns", runs[0].ID)
	if err != nil {
		t.Fatalf("fired run gone: %v", err)
	}
	if got.ScheduleID != nil || got.Status != store.StatusPending {
		t.Fatalf("fired run after delete: %+v", got)
	}
	if _, err := s.SchedulesGet(ctx, "ns", sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	// Its row, input included, is gone.
	var left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM kagzi.workflow_runs WHERE run_id = $1`, sc.ID).Scan(&left); err != nil ||
		left != 0 {
		t.Fatalf("rows of the deleted schedule: %d %v", left, err)
	}
	if err := s.SchedulesDelete(ctx, "ns", sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: %v", err)
	}
	if _, err := s.SchedulesHistory(ctx, "ns", sc.ID, 10); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("history of deleted: %v", err)
	}
	// Delete does not delete plain runs.
	l, _ := leasedRun(t, s, "ns")
	if err := s.SchedulesDelete(ctx, "ns", l.RunID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete a run as a schedule: %v", err)
	}
}

func TestSchedulesNamespaceIsolation(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc := createSchedule(t, s, store.SchedulesCreateParams{Namespace: "a", Cron: "@hourly"})
	if _, err := s.SchedulesGet(ctx, "b", sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
	if list, _, err := s.SchedulesList(ctx, store.SchedulesListParams{Namespace: "b"}); err != nil || len(list) != 0 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := s.SchedulesPause(ctx, "b", sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("pause: %v", err)
	}
	if _, err := s.SchedulesResume(ctx, "b", sc.ID, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("resume: %v", err)
	}
	if _, err := s.SchedulesTrigger(ctx, "b", sc.ID, t0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("trigger: %v", err)
	}
	if _, err := s.SchedulesHistory(ctx, "b", sc.ID, 10); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("history: %v", err)
	}
	next := sc.NextFireAt.Add(time.Hour)
	if _, _, err := s.SchedulesFire(ctx, store.SchedulesFireParams{Namespace: "b", ScheduleID: sc.ID, FireAt: *sc.NextFireAt, Next: &next}); !errors.Is(
		err,
		store.ErrNotFound,
	) {
		t.Fatalf("fire: %v", err)
	}
	if err := s.SchedulesDelete(ctx, "b", sc.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete: %v", err)
	}
	got, err := s.SchedulesGet(ctx, "a", sc.ID)
	if err != nil || got.Status != store.StatusScheduled || !got.NextFireAt.Equal(*sc.NextFireAt) {
		t.Fatalf("b changed a's schedule: %+v %v", got, err)
	}
}

func TestSchedulesListPages(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	var ids []uuid.UUID
	for i := 0; i < 5; i++ {
		ids = append(ids, createSchedule(t, s, store.SchedulesCreateParams{Cron: "@daily"}).ID)
	}
	createSchedule(t, s, store.SchedulesCreateParams{Namespace: "other", Cron: "@daily"})
	leasedRun(t, s, "ns") // runs are not schedules
	var seen []uuid.UUID
	var after *store.Cursor
	for page := 0; ; page++ {
		list, next, err := s.SchedulesList(ctx, store.SchedulesListParams{Namespace: "ns", Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, sc := range list {
			if sc.Input != nil {
				t.Fatal("list returned inputs")
			}
			seen = append(seen, sc.ID)
		}
		if next == nil {
			break
		}
		if page > 5 {
			t.Fatal("paging does not end")
		}
		after = next
	}
	if len(seen) != 5 {
		t.Fatalf("saw %d schedules, want 5", len(seen))
	}
	for i := range seen {
		// Newest first; ids are v7 and created in order.
		if seen[i] != ids[len(ids)-1-i] {
			t.Fatalf("order: %v, want reverse of %v", seen, ids)
		}
	}
}

func TestSchedulesDueAndNextDue(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	if next, err := s.SchedulesNextDue(ctx); err != nil || next != nil {
		t.Fatalf("no schedules: %v %v", next, err)
	}
	hourly := createSchedule(t, s, store.SchedulesCreateParams{Cron: "0 * * * *"})                     // 11:00
	quarter := createSchedule(t, s, store.SchedulesCreateParams{Namespace: "b", Cron: "*/15 * * * *"}) // 10:15
	daily := createSchedule(t, s, store.SchedulesCreateParams{Cron: "0 0 * * *"})                      // tomorrow
	paused := createSchedule(t, s, store.SchedulesCreateParams{Cron: "* * * * *"})                     // 10:01, paused
	if _, err := s.SchedulesPause(ctx, "ns", paused.ID); err != nil {
		t.Fatal(err)
	}
	next, err := s.SchedulesNextDue(ctx)
	if err != nil || next == nil || !next.Equal(*quarter.NextFireAt) {
		t.Fatalf("next due %v %v, want %v", next, err, quarter.NextFireAt)
	}
	due, err := s.SchedulesDue(ctx, t0.Add(time.Hour), 10)
	if err != nil || len(due) != 2 || due[0].ID != quarter.ID || due[1].ID != hourly.ID || due[0].Namespace != "b" {
		t.Fatalf("due: %+v %v", due, err)
	}
	if due, _ := s.SchedulesDue(ctx, t0.Add(time.Hour), 1); len(due) != 1 || due[0].ID != quarter.ID {
		t.Fatalf("due with limit: %+v", due)
	}
	if due, _ := s.SchedulesDue(ctx, t0.Add(48*time.Hour), 10); len(due) != 3 || due[2].ID != daily.ID {
		t.Fatalf("due later: %+v", due)
	}
}

func TestSchedulesTrigger(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "@daily", Input: []byte("x")})
	if _, err := s.SchedulesPause(ctx, "ns", sc.ID); err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Second)
	run, err := s.SchedulesTrigger(ctx, "ns", sc.ID, at)
	if err != nil {
		t.Fatal(err)
	}
	if run.ScheduleID == nil || *run.ScheduleID != sc.ID || !run.ScheduleFireAt.Equal(at.Truncate(time.Microsecond)) ||
		run.Status != store.StatusPending {
		t.Fatalf("triggered: %+v", run)
	}
	if full, _ := s.RunsGet(ctx, "ns", run.ID); string(full.Input) != "x" {
		t.Fatalf("input %q", full.Input)
	}
	again, err := s.SchedulesTrigger(ctx, "ns", sc.ID, at)
	if err != nil || again.ID != run.ID {
		t.Fatalf("trigger the same instant: %s %v, want %s", again.ID, err, run.ID)
	}
	if _, err := s.SchedulesTrigger(ctx, "ns", sc.ID, time.Time{}); err != nil {
		t.Fatal(err)
	}
	hist, err := s.SchedulesHistory(ctx, "ns", sc.ID, 10)
	if err != nil || len(hist) != 2 || !hist[0].ScheduleFireAt.After(*hist[1].ScheduleFireAt) {
		t.Fatalf("history newest first: %+v %v", hist, err)
	}
	got, _ := s.SchedulesGet(ctx, "ns", sc.ID)
	if got.Status != store.StatusPaused || got.LastFiredAt != nil {
		t.Fatalf("trigger moved the schedule: %+v", got)
	}
	if _, err := s.SchedulesTrigger(ctx, "ns", uuid.New(), at); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("trigger unknown: %v", err)
	}
}

func TestSchedulesFireValidation(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	sc := createSchedule(t, s, store.SchedulesCreateParams{Cron: "@hourly"})
	before := sc.NextFireAt.Add(-time.Hour)
	if _, _, err := s.SchedulesFire(ctx, store.SchedulesFireParams{Namespace: "ns", ScheduleID: sc.ID, FireAt: *sc.NextFireAt,
		Next: &before}); !errors.Is(
		err,
		store.ErrInvalidArgument,
	) {
		t.Fatalf("next before fire: %v", err)
	}
	if _, _, err := s.SchedulesFire(ctx, store.SchedulesFireParams{Namespace: "ns", ScheduleID: uuid.New(), FireAt: *sc.NextFireAt}); !errors.Is(
		err,
		store.ErrNotFound,
	) {
		t.Fatalf("unknown schedule: %v", err)
	}
	if got, _ := s.SchedulesGet(ctx, "ns", sc.ID); !got.NextFireAt.Equal(*sc.NextFireAt) || got.LastFiredAt != nil {
		t.Fatalf("rejected fires moved the schedule: %+v", got)
	}
}

// Fifty due schedules over five queues fire in one call: one statement
// (as many as for five schedules), one instance each with the template's
// columns and input, every template advanced, one readiness notification
// per queue.
func TestSchedulesFireDueManyFiresBatchInOneStatement(t *testing.T) {
	t.Parallel()
	_, url := testdb.Pool(t)
	ctx := context.Background()
	stmts := &stmtcount.Counter{}
	pool, err := store.ConnectTraced(ctx, url, stmts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := store.New(pool, store.Options{})
	pol := &retry.Policy{MaxAttempts: 4}
	const n = 50
	var scs []store.Schedule
	for i := 0; i < n; i++ {
		scs = append(scs, createSchedule(t, s, store.SchedulesCreateParams{Cron: "* * * * * *", Queue: fmt.Sprintf("q%d", i%5),
			Type: fmt.Sprintf("T%d", i), Version: "v1", Input: []byte(fmt.Sprintf(`{"i":%d}`, i)), RetryPolicy: pol}))
	}
	// Not due at now, and paused: neither advances.
	later := createSchedule(t, s, store.SchedulesCreateParams{Cron: "@hourly"})
	paused := createSchedule(t, s, store.SchedulesCreateParams{Cron: "* * * * * *"})
	if _, err := s.SchedulesPause(ctx, "ns", paused.ID); err != nil {
		t.Fatal(err)
	}
	ch := listen(t, url, 1)
	fireAt, next := t0.Add(time.Second), t0.Add(2*time.Second)
	now := fireAt.Add(5 * time.Millisecond)
	trace := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

	// A smaller batch first: the cost must not grow with the batch.
	before := stmts.Load()
	res, err := s.SchedulesFireDueMany(ctx, scs[:5], now, 0, trace)
	if err != nil {
		t.Fatal(err)
	}
	small := stmts.Load() - before
	before = stmts.Load()
	rest := append(append([]store.Schedule{}, scs[5:]...), later, paused)
	more, err := s.SchedulesFireDueMany(ctx, rest, now, 0, trace)
	if err != nil {
		t.Fatal(err)
	}
	if big := stmts.Load() - before; big != small || big != 1 {
		t.Fatalf("firing 5 schedules took %d statements and 47 took %d, want 1 each", small, big)
	}
	res = append(res, more...)
	if len(res) != n+2 {
		t.Fatalf("%d results for %d schedules", len(res), n+2)
	}
	for i, sc := range scs {
		r := res[i]
		if r.ScheduleID != sc.ID || !r.Advanced || r.Err != nil || len(r.Runs) != 1 {
			t.Fatalf("schedule %d: %+v", i, r)
		}
		run := r.Runs[0]
		if run.ScheduleID == nil || *run.ScheduleID != sc.ID || !run.ScheduleFireAt.Equal(fireAt) || run.Status != store.StatusPending ||
			run.Namespace != "ns" || run.Queue != sc.Queue || run.Type != sc.Type || run.Version != "v1" ||
			// Each instance of a batch is a trace of its own.
			run.TraceContext == trace || !traceParentRE.MatchString(run.TraceContext) ||
			run.RetryPolicy == nil || run.RetryPolicy.MaxAttempts != 4 || run.AvailableAt == nil || run.ID.Version() != 7 || run.CronExpr != "" {
			t.Fatalf("schedule %d: instance %+v", i, run)
		}
		full, err := s.RunsGet(ctx, "ns", run.ID)
		if err != nil || string(full.Input) != fmt.Sprintf(`{"i":%d}`, i) || full.Status != store.StatusPending {
			t.Fatalf("schedule %d: stored instance %+v %v", i, full, err)
		}
		got, err := s.SchedulesGet(ctx, "ns", sc.ID)
		if err != nil || got.Status != store.StatusScheduled || !got.NextFireAt.Equal(next) || !got.LastFiredAt.Equal(fireAt) {
			t.Fatalf("schedule %d after the fire: %+v %v", i, got, err)
		}
		if hist, _ := s.SchedulesHistory(ctx, "ns", sc.ID, 10); len(hist) != 1 {
			t.Fatalf("schedule %d: history %+v", i, hist)
		}
	}
	for _, r := range res[n:] {
		if r.Advanced || len(r.Runs) != 0 || r.Err != nil {
			t.Fatalf("a schedule that was not due fired: %+v", r)
		}
	}
	if got, _ := s.SchedulesGet(ctx, "ns", later.ID); !got.NextFireAt.Equal(*later.NextFireAt) || got.LastFiredAt != nil {
		t.Fatalf("not-due schedule moved: %+v", got)
	}
	if got, _ := s.SchedulesGet(ctx, "ns", paused.ID); got.Status != store.StatusPaused || got.LastFiredAt != nil {
		t.Fatalf("paused schedule moved: %+v", got)
	}

	// The statement-level trigger: one readiness notification per queue
	// for each call's insert, one change per advanced template.
	if _, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "marker", Type: "T"}); err != nil {
		t.Fatal(err)
	}
	ready, changed := map[string]int{}, 0
	for {
		nt, err := store.ParseNotification(<-ch)
		if err != nil {
			t.Fatal(err)
		}
		if nt.Queue == "marker" {
			break
		}
		switch nt.Kind {
		case store.NotifyReady:
			ready[nt.Queue]++
		case store.NotifySchedule:
			if nt.At == nil || !nt.At.Equal(next) {
				t.Fatalf("schedule change %+v, want next %v", nt, next)
			}
			changed++
		default:
			t.Fatalf("unexpected notification %+v", nt)
		}
	}
	if len(ready) != 5 || changed != n {
		t.Fatalf("readiness notifications by queue %v, schedule changes %d: want 5 queues and %d changes", ready, changed, n)
	}
	for q, k := range ready {
		// The 5-schedule call touched every queue once, the other call too.
		if k != 2 {
			t.Fatalf("queue %s: %d readiness notifications, want 2 (one per call)", q, k)
		}
	}
}

// Two schedulers fire the same due set at once, in opposite orders, round
// after round: neither fails, each schedule advances in exactly one of
// them, and each fire time has exactly one instance.
func TestSchedulesFireDueManyRacingSchedulers(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	const n = 40
	for i := 0; i < n; i++ {
		// Every second, some with missed times to catch up as well.
		createSchedule(t, s, store.SchedulesCreateParams{Cron: "* * * * * *", MaxCatchup: i % 3})
	}
	now := t0.Add(time.Second)
	wantRuns := 0
	for round := 0; round < 6; round++ {
		if round == 3 {
			// Back after 30 s away: missed times, and the window.
			now = now.Add(30 * time.Second)
		}
		due, err := s.SchedulesDue(ctx, now, 1000)
		if err != nil || len(due) != n {
			t.Fatalf("round %d: %d due %v", round, len(due), err)
		}
		reversed := slices.Clone(due)
		slices.Reverse(reversed)
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			res   [2][]store.SchedulesFireDueManyResult
			errs  [2]error
		)
		for g, set := range [][]store.Schedule{due, reversed} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res[g], errs[g] = s.SchedulesFireDueMany(ctx, set, now, 10*time.Second, "")
			}()
		}
		close(start)
		wg.Wait()
		for g := range errs {
			if errs[g] != nil {
				t.Fatalf("round %d scheduler %d: %v", round, g, errs[g])
			}
		}
		advanced := map[uuid.UUID]int{}
		for _, rs := range res {
			for _, r := range rs {
				if r.Err != nil {
					t.Fatalf("round %d: %+v", round, r)
				}
				if r.Advanced {
					advanced[r.ScheduleID]++
				} else if len(r.Runs) != 0 {
					t.Fatalf("round %d: created runs without advancing: %+v", round, r)
				}
				wantRuns += len(r.Runs)
			}
		}
		if len(advanced) != n {
			t.Fatalf("round %d: %d schedules advanced, want %d", round, len(advanced), n)
		}
		for id, k := range advanced {
			if k != 1 {
				t.Fatalf("round %d: schedule %s advanced %d times", round, id, k)
			}
		}
		now = now.Add(time.Second)
	}
	// Rounds 0-2 and 4-5 fire one time each; round 3 fires the times
	// within the window (10 s) plus max_catchup missed ones.
	due, _ := s.SchedulesDue(ctx, now.Add(time.Hour), 1000)
	total := 0
	for _, sc := range due {
		hist, err := s.SchedulesHistory(ctx, "ns", sc.ID, 1000)
		if err != nil {
			t.Fatal(err)
		}
		want := 5 + 11 + sc.MaxCatchup
		if len(hist) != want {
			t.Fatalf("schedule with catch-up %d fired %d times, want %d", sc.MaxCatchup, len(hist), want)
		}
		seen := map[time.Time]bool{}
		for _, r := range hist {
			if seen[*r.ScheduleFireAt] {
				t.Fatalf("fire time %v fired twice", r.ScheduleFireAt)
			}
			seen[*r.ScheduleFireAt] = true
		}
		total += len(hist)
	}
	if len(due) != n || total != wantRuns {
		t.Fatalf("%d schedules with %d instances, the calls reported %d", len(due), total, wantRuns)
	}
}

// Catch-up in a batch is CatchUp's decision per schedule, as for one
// schedule: window, max_catchup, a cron's last time, and a schedule that
// cannot be worked out does not hold back the others.
func TestSchedulesFireDueManyCatchUp(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	three := createSchedule(t, s, store.SchedulesCreateParams{Cron: "* * * * *", MaxCatchup: 3})
	none := createSchedule(t, s, store.SchedulesCreateParams{Cron: "* * * * *"})
	seconds := createSchedule(t, s, store.SchedulesCreateParams{Cron: "*/5 * * * * *", MaxCatchup: 1, Now: t0.Add(10*time.Minute + 5*time.Second)})
	last := createSchedule(t, s, store.SchedulesCreateParams{Cron: "0 9 15 1 * 2030", MaxCatchup: 1, Now: t0.Add(-2 * time.Hour)})
	broken := createSchedule(t, s, store.SchedulesCreateParams{Cron: "@hourly", Now: t0.Add(-2 * time.Hour)})
	hourly := createSchedule(t, s, store.SchedulesCreateParams{Cron: "@hourly"})
	// 10:01 to 10:10 were missed by the minute ones (10:10 by 30 s).
	now := t0.Add(10*time.Minute + 30*time.Second)
	bad := broken
	bad.Cron = "not a cron"
	scs := []store.Schedule{three, none, seconds, last, bad, hourly}
	res, err := s.SchedulesFireDueMany(ctx, scs, now, 10*time.Second, "")
	if err != nil {
		t.Fatal(err)
	}
	m := func(mm, ss int) time.Time {
		return t0.Add(time.Duration(mm)*time.Minute + time.Duration(ss)*time.Second)
	}
	want := []struct {
		advanced bool
		fires    []time.Time
		next     *time.Time
	}{
		{true, []time.Time{m(8, 0), m(9, 0), m(10, 0)}, ptr(m(11, 0))},
		{true, nil, ptr(m(11, 0))},
		// 10:10:10 and 10:10:15 were missed (more than 10 s ago), the later
		// one is caught up; 10:10:20 to 10:10:30 are within the window.
		{true, []time.Time{m(10, 15), m(10, 20), m(10, 25), m(10, 30)}, ptr(m(10, 35))},
		{true, []time.Time{t0.Add(-time.Hour)}, nil},
		{false, nil, broken.NextFireAt},
		{false, nil, hourly.NextFireAt},
	}
	for i, w := range want {
		r := res[i]
		if r.ScheduleID != scs[i].ID || r.Advanced != w.advanced || len(r.Runs) != len(w.fires) {
			t.Fatalf("schedule %d: %+v, want advanced=%v and fires %v", i, r, w.advanced, w.fires)
		}
		for k, f := range w.fires {
			if !r.Runs[k].ScheduleFireAt.Equal(f) {
				t.Fatalf("schedule %d: fired %v, want %v", i, r.Runs[k].ScheduleFireAt, w.fires)
			}
		}
		got, err := s.SchedulesGet(ctx, "ns", scs[i].ID)
		if err != nil {
			t.Fatal(err)
		}
		if (got.NextFireAt == nil) != (w.next == nil) || (w.next != nil && !got.NextFireAt.Equal(*w.next)) {
			t.Fatalf("schedule %d: next fire %v, want %v", i, got.NextFireAt, w.next)
		}
		if hist, _ := s.SchedulesHistory(ctx, "ns", scs[i].ID, 100); len(hist) != len(w.fires) {
			t.Fatalf("schedule %d: history %d runs, want %d", i, len(hist), len(w.fires))
		}
	}
	// Missed times skipped: advanced, and last_fired_at does not move.
	if got, _ := s.SchedulesGet(ctx, "ns", none.ID); got.LastFiredAt != nil || got.Status != store.StatusScheduled {
		t.Fatalf("skipping missed times: %+v", got)
	}
	if got, _ := s.SchedulesGet(ctx, "ns", three.ID); !got.LastFiredAt.Equal(m(10, 0)) {
		t.Fatalf("catch-up: last fired %v", got.LastFiredAt)
	}
	// Its last time fired: paused, as it has no next.
	if got, _ := s.SchedulesGet(ctx, "ns", last.ID); got.Status != store.StatusPaused || !got.LastFiredAt.Equal(t0.Add(-time.Hour)) {
		t.Fatalf("after its last time: %+v", got)
	}
	if res[4].Err == nil || !errors.Is(res[4].Err, store.ErrInvalidArgument) || !strings.Contains(res[4].Err.Error(), broken.ID.String()) {
		t.Fatalf("broken schedule: %v", res[4].Err)
	}
	// With a minute's window, 45 s late is due, not missed.
	again, _ := s.SchedulesGet(ctx, "ns", none.ID)
	res, err = s.SchedulesFireDueMany(ctx, []store.Schedule{again}, m(11, 45), time.Minute, "")
	if err != nil || !res[0].Advanced || len(res[0].Runs) != 1 || !res[0].Runs[0].ScheduleFireAt.Equal(m(11, 0)) {
		t.Fatalf("due 10:11, fired at 10:11:45 with a minute's window: %+v %v", res, err)
	}
	if _, err := s.SchedulesFireDueMany(ctx, []store.Schedule{three, three}, now.Add(time.Hour), 0, ""); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("a schedule listed twice: %v", err)
	}
	if res, err := s.SchedulesFireDueMany(ctx, nil, now, 0, ""); err != nil || len(res) != 0 {
		t.Fatalf("no schedules: %v %v", res, err)
	}
}

func ptr[T any](v T) *T { return &v }
