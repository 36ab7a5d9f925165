package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/kagzi/kagzi/internal/clock"
	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/services/scheduler"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// c0 is where the fake clock starts: half a minute before a minute tick.
var c0 = time.Date(2030, 1, 15, 10, 0, 30, 0, time.UTC)

// at is c0's day at 10:mm:ss.
func at(mm, ss int) time.Time { return time.Date(2030, 1, 15, 10, mm, ss, 0, time.UTC) }

// harness is one database and one NATS server, optionally with a relay.
type harness struct {
	t   *testing.T
	url string
	st  *store.Store
	ns  *testnats.Server
	nc  *nats.Conn
}

func newHarness(t *testing.T, relay bool) *harness {
	t.Helper()
	pool, url := testdb.Pool(t)
	ns := testnats.Start(t)
	h := &harness{t: t, url: url, st: store.New(pool, store.Options{}), ns: ns, nc: ns.Connect(t)}
	if relay {
		up := make(chan *nats.Msg, 4)
		sub, err := h.nc.ChanSubscribe(protocol.SubjectRelayUp, up)
		must(t, err)
		must(t, h.nc.Flush())
		dcfg, err := config.Defaults[dispatcher.Config](t.Context())
		must(t, err)
		dcfg.DatabaseURL = url
		r := dispatcher.NewRelay(dcfg, dispatcher.RelayDeps{}, ns.Connect(t), nil)
		must(t, r.Start(t.Context()))
		t.Cleanup(r.Stop)
		// Schedulers started from now on never see this announcement.
		select {
		case <-up:
		case <-time.After(15 * time.Second):
			t.Fatal("the relay did not come up")
		}
		must(t, sub.Unsubscribe())
	}
	return h
}

// scheduler starts a scheduler at the default configuration with its
// own pool (counted by stmts when given) and NATS connection, stopped when
// the test ends.
func (h *harness) scheduler(deps scheduler.Deps, stmts *stmtcount.Counter) *scheduler.Scheduler {
	h.t.Helper()
	return h.schedulerWith(nil, deps, stmts)
}

// schedulerWith is scheduler with what set changes in the configuration.
func (h *harness) schedulerWith(set func(*scheduler.Config), deps scheduler.Deps, stmts *stmtcount.Counter) *scheduler.Scheduler {
	h.t.Helper()
	ctx := h.t.Context()
	cfg, err := config.Defaults[scheduler.Config](ctx)
	must(h.t, err)
	if set != nil {
		set(&cfg)
	}
	var st *store.Store
	if stmts != nil {
		pool, err := store.ConnectTraced(ctx, h.url, stmts)
		must(h.t, err)
		h.t.Cleanup(pool.Close)
		st = store.New(pool, store.Options{})
	} else {
		pool, err := store.Connect(ctx, h.url)
		must(h.t, err)
		h.t.Cleanup(pool.Close)
		st = store.New(pool, store.Options{})
	}
	s := scheduler.New(cfg, deps, st, h.ns.Connect(h.t), slog.New(slog.DiscardHandler))
	err = s.Start(ctx)
	must(h.t, err)
	h.t.Cleanup(s.Stop)
	return s
}

func (h *harness) create(p store.SchedulesCreateParams) store.Schedule {
	h.t.Helper()
	p.Namespace, p.Queue = "ns", "q"
	if p.Type == "" {
		p.Type = "Tick"
	}
	sc, err := h.st.SchedulesCreate(h.t.Context(), p)
	must(h.t, err)
	return sc
}

// fireTimes is the schedule's history, oldest first.
func (h *harness) fireTimes(id store.Schedule) []time.Time {
	h.t.Helper()
	runs, err := h.st.SchedulesHistory(h.t.Context(), "ns", id.ID, 1000)
	must(h.t, err)
	out := make([]time.Time, len(runs))
	for i, r := range runs {
		out[len(runs)-1-i] = *r.ScheduleFireAt
	}
	return out
}

func (h *harness) wantFireTimes(sc store.Schedule, want ...time.Time) {
	h.t.Helper()
	got := h.fireTimes(sc)
	if len(got) != len(want) {
		h.t.Fatalf("schedule fired at %v, want %v", got, want)
	}
	for i := range got {
		if !got[i].Equal(want[i]) {
			h.t.Fatalf("schedule fired at %v, want %v", got, want)
		}
	}
}

// publish sends raw data on subject and makes sure the server has it.
func (h *harness) publish(subject string, data []byte) {
	h.t.Helper()
	must(h.t, h.nc.Publish(subject, data))
	must(h.t, h.nc.Flush())
}

func (h *harness) relayUp() {
	h.t.Helper()
	data, err := protocol.Encode(&protocol.RelayUp{RelayID: "test", At: time.Now()})
	must(h.t, err)
	h.publish(protocol.SubjectRelayUp, data)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds (the condition, not the poll interval,
// is the synchronisation).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func armedAt(s *scheduler.Scheduler, want time.Time) func() bool {
	return func() bool {
		a := s.Stats().ArmedAt
		return a != nil && a.Equal(want)
	}
}

func disarmed(s *scheduler.Scheduler) func() bool {
	return func() bool { return s.Stats().ArmedAt == nil }
}

func passesAbove(s *scheduler.Scheduler, n int64) func() bool {
	return func() bool { return s.Stats().Passes > n }
}

// Three replicas and an every-second schedule for 10 s: each fire time
// fires once, none is skipped, and the replicas together fired them all.
func TestReplicasFireEachTimeExactlyOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	var scs []*scheduler.Scheduler
	for i := 0; i < 3; i++ {
		s := h.scheduler(scheduler.Deps{}, nil)
		scs = append(scs, s)
	}
	for _, s := range scs {
		waitFor(t, "the first backlog read", passesAbove(s, 0))
	}
	sc := h.create(store.SchedulesCreateParams{Cron: "* * * * * *", Now: time.Now()})
	// The measured window: ten fire times, stopped half-way between two,
	// so that no fire is in flight (committed, not yet counted) at Stop.
	<-time.After(time.Until(sc.NextFireAt.Add(9500 * time.Millisecond)))
	for _, s := range scs {
		s.Stop()
	}
	got := h.fireTimes(sc)
	if len(got) < 9 || len(got) > 11 {
		t.Fatalf("%d runs fired in 10 s of an every-second schedule, want 10 ± 1: %v", len(got), got)
	}
	if !got[0].Equal(*sc.NextFireAt) {
		t.Fatalf("first fire at %v, want %v", got[0], sc.NextFireAt)
	}
	for i := 1; i < len(got); i++ {
		if d := got[i].Sub(got[i-1]); d != time.Second {
			t.Fatalf("fire times %v and %v are %v apart: duplicated or skipped", got[i-1], got[i], d)
		}
	}
	var fired, advanced, lost int64
	for _, s := range scs {
		st := s.Stats()
		fired, advanced, lost = fired+st.Fired, advanced+st.Advanced, lost+st.Lost
		if st.Errors != 0 || st.Malformed != 0 {
			t.Fatalf("replica stats %+v", st)
		}
	}
	if fired != int64(len(got)) || advanced != int64(len(got)) {
		t.Fatalf("the replicas counted %d runs fired and %d advances, the history has %d", fired, advanced, len(got))
	}
	// The same through the runs listing.
	id := sc.ID
	runs, _, err := h.st.RunsList(t.Context(), store.RunsListParams{Namespace: "ns", ScheduleID: &id, Limit: 100})
	must(t, err)
	if len(runs) != len(got) {
		t.Fatalf("RunsList has %d runs of the schedule, history %d", len(runs), len(got))
	}
	t.Logf("%d fires, %d lost races", len(got), lost)
}

// After 20 fire times without a scheduler, the last 5 are within the
// catch-up window (5 min) and fire for every schedule; of the 15 older,
// missed ones, max_catchup 3 fires the last 3 and max_catchup 0 none. Both
// then resume on schedule.
func TestCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	clk := clock.NewFake(c0)
	three := h.create(store.SchedulesCreateParams{Cron: "* * * * *", MaxCatchup: 3, Now: c0})
	none := h.create(store.SchedulesCreateParams{Cron: "* * * * *", MaxCatchup: 0, Now: c0})
	first := h.scheduler(scheduler.Deps{Clock: clk}, nil)
	waitFor(t, "the timer armed at 10:01", armedAt(first, at(1, 0)))
	// Downtime: no scheduler runs from before 10:01 to 10:20:30, so
	// 10:01 … 10:20 are 20 due times, 10:16 … 10:20 within the window.
	first.Stop()
	if n := len(clk.Armed()); n != 0 {
		t.Fatalf("a stopped scheduler left %d timers armed", n)
	}
	clk.Set(at(20, 30))
	rec, reader := tracetest.NewSpanRecorder(), sdkmetric.NewManualReader()
	s := h.scheduler(scheduler.Deps{Clock: clk, TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}, nil)
	waitFor(t, "the backlog read and the timer armed at 10:21", func() bool {
		return s.Stats().Passes >= 1 && armedAt(s, at(21, 0))()
	})
	window := []time.Time{at(16, 0), at(17, 0), at(18, 0), at(19, 0), at(20, 0)}
	h.wantFireTimes(three, append([]time.Time{at(13, 0), at(14, 0), at(15, 0)}, window...)...)
	h.wantFireTimes(none, window...)
	for _, sc := range []store.Schedule{three, none} {
		got, err := h.st.SchedulesGet(t.Context(), "ns", sc.ID)
		must(t, err)
		if !got.NextFireAt.Equal(at(21, 0)) {
			t.Fatalf("after catch-up, next fire %v, want 10:21", got.NextFireAt)
		}
	}
	if st := s.Stats(); st.Fired != 13 || st.Advanced != 2 || st.Errors != 0 {
		t.Fatalf("stats after catch-up: %+v", st)
	}
	// Each fired run's kagzi.schedule.fire span is in the run's own trace;
	// each schedule that fired several times has a catch-up span.
	spans := map[string]int{}
	for _, sp := range rec.Ended() {
		name, _, _ := strings.Cut(sp.Name(), " ")
		spans[name]++
		if name == "kagzi.schedule.fire" {
			var runID string
			for _, a := range sp.Attributes() {
				if a.Key == "kagzi.run_id" {
					runID = a.Value.AsString()
				}
			}
			run, err := h.st.RunsGet(t.Context(), "ns", uuid.MustParse(runID))
			must(t, err)
			if !strings.Contains(run.TraceContext, sp.SpanContext().TraceID().String()) {
				t.Fatalf("fire span of run %s in trace %s, the run's is %s", runID, sp.SpanContext().TraceID(), run.TraceContext)
			}
		}
	}
	if spans["kagzi.schedule.fire"] != 13 || spans["kagzi.schedule.catchup"] != 2 || spans["kagzi.schedule.skip"] != 0 {
		t.Fatalf("scheduler spans %v, want 13 fires and 2 catch-ups", spans)
	}
	if got := sumCounter(t, reader, "kagzi.schedule.fires"); got != 13 {
		t.Fatalf("kagzi.schedule.fires %d, want 13", got)
	}

	// Back on schedule: 10:21 fires for both, at its time.
	p := s.Stats().Passes
	clk.Set(at(21, 0))
	waitFor(t, "the 10:21 fire", func() bool { return passesAbove(s, p)() && armedAt(s, at(22, 0))() })
	if n := len(h.fireTimes(none)); n != 6 {
		t.Fatalf("after 10:21, %d fires, want 6", n)
	}

	// Away again for longer than a short window: only max_catchup fires.
	rec2, reader2 := tracetest.NewSpanRecorder(), sdkmetric.NewManualReader()
	short := h.schedulerWith(func(c *scheduler.Config) { c.SchedulerCatchUpWindow = 10 * time.Second }, scheduler.Deps{Clock: clk,
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec2)),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader2))}, nil)
	s.Stop()
	p = short.Stats().Passes
	clk.Set(at(25, 20))
	waitFor(t, "the catch-up after 10:25", func() bool { return passesAbove(short, p)() && armedAt(short, at(26, 0))() })
	h.wantFireTimes(none, append(window, at(21, 0))...)
	h.wantFireTimes(three, at(13, 0), at(14, 0), at(15, 0), at(16, 0), at(17, 0), at(18, 0), at(19, 0), at(20, 0), at(21, 0),
		at(23, 0), at(24, 0), at(25, 0))
	// The schedule that skipped its missed times says so.
	skips := 0
	for _, sp := range rec2.Ended() {
		if strings.HasPrefix(sp.Name(), "kagzi.schedule.skip") {
			skips++
		}
	}
	if skips != 1 || sumCounter(t, reader2, "kagzi.schedule.skipped") != 1 {
		t.Fatalf("%d skip spans, kagzi.schedule.skipped %d; want 1 each", skips, sumCounter(t, reader2, "kagzi.schedule.skipped"))
	}
}

// sumCounter is the sum of an int64 counter's points in reader.
func sumCounter(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	must(t, reader.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, dp := range sum.DataPoints {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// Nothing fires while a schedule is paused, and resuming fires none of the
// times missed while paused, even with a catch-up allowance.
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	clk := clock.NewFake(c0)
	sc := h.create(store.SchedulesCreateParams{Cron: "* * * * *", MaxCatchup: 5, Now: c0})
	s := h.scheduler(scheduler.Deps{Clock: clk}, nil)
	waitFor(t, "the timer armed at 10:01", armedAt(s, at(1, 0)))
	clk.Set(at(1, 0))
	waitFor(t, "the timer re-armed at 10:02", armedAt(s, at(2, 0)))
	h.wantFireTimes(sc, at(1, 0))

	// Pause: the change reaches the scheduler by push and disarms it.
	_, err := h.st.SchedulesPause(t.Context(), "ns", sc.ID)
	must(t, err)
	waitFor(t, "the timer disarmed by the pause", disarmed(s))
	if n := len(clk.Armed()); n != 0 {
		t.Fatalf("%d timers armed while the only schedule is paused", n)
	}
	clk.Set(at(10, 30))
	// A backlog read while paused: nothing is due.
	p := s.Stats().Passes
	h.relayUp()
	waitFor(t, "a backlog read while paused", passesAbove(s, p))
	h.wantFireTimes(sc, at(1, 0))

	// Resume at 10:10:30: next fire 10:11, armed by push; the 9 times
	// missed while paused are not caught up.
	r, err := h.st.SchedulesResume(t.Context(), "ns", sc.ID, clk.Now())
	must(t, err)
	if !r.NextFireAt.Equal(at(11, 0)) {
		t.Fatalf("resumed with next fire %v", r.NextFireAt)
	}
	waitFor(t, "the timer armed at 10:11 by the resume", armedAt(s, at(11, 0)))
	p = s.Stats().Passes
	h.relayUp()
	waitFor(t, "a backlog read after the resume", passesAbove(s, p))
	h.wantFireTimes(sc, at(1, 0))

	clk.Set(at(11, 0))
	waitFor(t, "the timer re-armed at 10:12", armedAt(s, at(12, 0)))
	h.wantFireTimes(sc, at(1, 0), at(11, 0))
}

// A schedule created while the scheduler runs is armed by its
// ScheduleChanged message, without a statement; deleting it disarms the
// timer.
func TestNewScheduleArrivesByPushAndDeleteDisarms(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	clk := clock.NewFake(c0)
	stmts := &stmtcount.Counter{}
	s := h.scheduler(scheduler.Deps{Clock: clk}, stmts)
	waitFor(t, "the first backlog read", passesAbove(s, 0))
	if s.Stats().ArmedAt != nil || len(clk.Armed()) != 0 {
		t.Fatalf("armed with no schedule: %+v", s.Stats())
	}
	before, stats := stmts.Load(), s.Stats()

	sc := h.create(store.SchedulesCreateParams{Cron: "* * * * *", Now: c0})
	waitFor(t, "the timer armed by push at 10:01", armedAt(s, at(1, 0)))
	if n := stmts.Load() - before; n != 0 {
		t.Fatalf("the scheduler issued %d statements to learn of the new schedule, want 0 (push)", n)
	}
	if now := s.Stats(); now.Passes != stats.Passes || now.Rearms != stats.Rearms || now.Changes <= stats.Changes {
		t.Fatalf("stats before %+v, after %+v: want no read and a change message", stats, now)
	}

	clk.Set(at(1, 0))
	waitFor(t, "the timer re-armed at 10:02", armedAt(s, at(2, 0)))
	h.wantFireTimes(sc, at(1, 0))

	must(t, h.st.SchedulesDelete(t.Context(), "ns", sc.ID))
	waitFor(t, "the timer disarmed by the delete", disarmed(s))
	if n := len(clk.Armed()); n != 0 {
		t.Fatalf("%d timers armed after the only schedule was deleted", n)
	}
	// The run it fired stays (without its schedule id).
	runs, _, err := h.st.RunsList(t.Context(), store.RunsListParams{Namespace: "ns"})
	must(t, err)
	if len(runs) != 1 || runs[0].ScheduleID != nil {
		t.Fatalf("runs after the delete: %+v", runs)
	}
}

// A scheduler whose only schedule is an hour away costs Postgres nothing.
func TestIdleIssuesNoStatements(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	next := time.Now().Add(time.Hour).UTC()
	sc := h.create(store.SchedulesCreateParams{Cron: fmt.Sprintf("%d %d %d * * *", next.Second(), next.Minute(), next.Hour()), Now: time.Now()})
	if d := time.Until(*sc.NextFireAt); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("schedule due in %v, want an hour", d)
	}
	stmts := &stmtcount.Counter{}
	s := h.scheduler(scheduler.Deps{}, stmts)
	waitFor(t, "the timer armed an hour out", func() bool { return passesAbove(s, 0)() && armedAt(s, *sc.NextFireAt)() })
	before, passes := stmts.Load(), s.Stats().Passes
	<-time.After(2 * time.Second) // the measured idle window itself
	if n := stmts.Load() - before; n != 0 {
		t.Fatalf("idle for 2 s, the scheduler issued %d statements, want 0", n)
	}
	if st := s.Stats(); st.Passes != passes || st.Rearms != 0 {
		t.Fatalf("idle scheduler read Postgres: %+v", st)
	}
	s.Stop()
	s.Stop()
}

// Malformed messages on both subjects are counted and dropped, and change
// nothing: the scheduler keeps its timer and keeps firing.
func TestMalformedMessagesAreDropped(t *testing.T) {
	t.Parallel()
	h := newHarness(t, true)
	clk := clock.NewFake(c0)
	sc := h.create(store.SchedulesCreateParams{Cron: "* * * * *", Now: c0})
	s := h.scheduler(scheduler.Deps{Clock: clk}, nil)
	// The push can arm the timer before the backlog read ends: the read
	// must be over, or it counts as a change the messages made.
	waitFor(t, "the first backlog read and the timer armed at 10:01", func() bool {
		return passesAbove(s, 0)() && armedAt(s, at(1, 0))()
	})
	before := s.Stats()

	soon := c0.Add(time.Second)
	valid := func(m protocol.ScheduleChanged) []byte {
		data, err := protocol.Encode(&m)
		must(t, err)
		return data
	}
	wrongVersion := []byte(fmt.Sprintf(`{"v":2,"ns":"ns","schedule_id":%q}`, sc.ID))
	bad := []struct {
		subject string
		data    []byte
	}{
		{protocol.SubjectSchedule("ns"), []byte("not json")},
		{protocol.SubjectSchedule("ns"), []byte(`{"v":1,"ns":"ns","schedule_id":"nope"}`)},
		{protocol.SubjectSchedule("ns"), []byte(fmt.Sprintf(`{"v":1,"ns":"ns","schedule_id":%q,"extra":1}`, sc.ID))},
		{protocol.SubjectSchedule("ns"), wrongVersion},
		// Valid, but for another namespace than its subject says: it would
		// arm the timer at once if it were believed.
		{protocol.SubjectSchedule("ns"), valid(protocol.ScheduleChanged{Namespace: "other", ScheduleID: sc.ID, NextAt: &soon})},
		{protocol.SubjectRelayUp, []byte("garbage")},
		{protocol.SubjectRelayUp, []byte(`{"v":1,"relay_id":""}`)},
	}
	for _, b := range bad {
		h.publish(b.subject, b.data)
	}
	waitFor(t, "every malformed message counted", func() bool { return s.Stats().Malformed == before.Malformed+int64(len(bad)) })
	after := s.Stats()
	if after.Passes != before.Passes || after.Resyncs != before.Resyncs || after.Changes != before.Changes ||
		after.ArmedAt == nil || !after.ArmedAt.Equal(at(1, 0)) {
		t.Fatalf("malformed messages changed the scheduler: before %+v, after %+v", before, after)
	}
	clk.Set(at(1, 0))
	waitFor(t, "the timer re-armed at 10:02", armedAt(s, at(2, 0)))
	h.wantFireTimes(sc, at(1, 0))
}

// Changes published while the scheduler's NATS connection was down are
// lost; the reconnect reads the backlog again.
func TestReconnectReadsBacklog(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false) // no relay: nothing but the reconnect tells the scheduler
	clk := clock.NewFake(c0)
	s := h.scheduler(scheduler.Deps{Clock: clk}, nil)
	waitFor(t, "the first backlog read", passesAbove(s, 0))
	sc := h.create(store.SchedulesCreateParams{Cron: "* * * * *", Now: c0})
	if s.Stats().ArmedAt != nil {
		t.Fatal("armed without being told")
	}
	resyncs := s.Stats().Resyncs
	h.ns.Restart(t)
	waitFor(t, "the reconnect's backlog read arming the timer at 10:01", func() bool {
		return s.Stats().Resyncs > resyncs && armedAt(s, at(1, 0))()
	})
	clk.Set(at(1, 0))
	waitFor(t, "the timer re-armed at 10:02", armedAt(s, at(2, 0)))
	h.wantFireTimes(sc, at(1, 0))
}

// Fire times never repeat even when a due schedule is read by many
// schedulers at once and the clock jumps.
func TestConcurrentCatchUpFiresOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, false)
	clk := clock.NewFake(c0)
	sc := h.create(store.SchedulesCreateParams{Cron: "* * * * *", MaxCatchup: 4, Now: c0})
	clk.Set(at(30, 30))
	var scs []*scheduler.Scheduler
	for i := 0; i < 4; i++ {
		scs = append(scs, h.scheduler(scheduler.Deps{Clock: clk}, nil))
	}
	for _, s := range scs {
		waitFor(t, "the backlog read", func() bool { return passesAbove(s, 0)() && armedAt(s, at(31, 0))() })
	}
	// 10:26 … 10:30 are within the window, 10:22 … 10:25 the catch-up.
	h.wantFireTimes(sc, at(22, 0), at(23, 0), at(24, 0), at(25, 0), at(26, 0), at(27, 0), at(28, 0), at(29, 0), at(30, 0))
	var fired, lost int64
	for _, s := range scs {
		fired, lost = fired+s.Stats().Fired, lost+s.Stats().Lost
	}
	if fired != 9 {
		t.Fatalf("the schedulers counted %d runs fired, want 9", fired)
	}
	t.Logf("lost races: %d", lost)
}
