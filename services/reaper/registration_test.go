package reaper_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/pgsession"
	"github.com/kagzi/kagzi/services/reaper"
)

// A worker whose registration no reaper heard (it started first) is known
// from its heartbeats alone, without its types; its repeated registration
// completes the row, and a registration repeated unchanged writes nothing.
func TestRepeatedRegistrationCompletesAWorkerKnownFromHeartbeats(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.reaper(reaper.Knobs{}, nil, nil)
	waitLeader(t, r)
	f := h.fake()
	f.beat(false)
	h.flush()
	eventually(t, 10*time.Second, "worker written from its heartbeat", func() bool {
		w, ok := h.worker(f.id)
		return ok && w.Status == store.WorkerOnline
	})
	if w, _ := h.worker(f.id); len(w.Types) != 0 {
		t.Fatalf("types %v known from a heartbeat alone", w.Types)
	}
	f.register()
	h.flush()
	eventually(t, 10*time.Second, "registration completes the row", func() bool {
		w, _ := h.worker(f.id)
		return len(w.Types) == 1 && w.Hostname == "fake" && w.PID == 7
	})
	before := settled(t, r, "registration counted", func(st reaper.Stats) bool { return st.Registered >= 2 }).Registered
	for i := 0; i < 3; i++ {
		f.register()
		f.beat(false)
	}
	// A new worker's registration after them: once it is written, the
	// leader has handled every message before it (one channel, in order).
	g := h.fake()
	g.register()
	h.flush()
	eventually(t, 10*time.Second, "marker worker written", func() bool { _, ok := h.worker(g.id); return ok })
	if got := settled(t, r, "marker counted", func(st reaper.Stats) bool { return st.Registered >= before+1 }).Registered; got != before+1 {
		t.Errorf("an unchanged registration repeated 3 times wrote %d rows, want none", got-before-1)
	}
}

// notices subscribes to f's registration notices.
func (f *fake) notices() chan protocol.RegistrationNotice {
	f.h.t.Helper()
	ch := make(chan protocol.RegistrationNotice, 256)
	_, err := f.h.pub.Subscribe(protocol.SubjectRegistration(f.ns, f.id), func(m *nats.Msg) {
		var n protocol.RegistrationNotice
		if err := protocol.Decode(m.Data, &n); err != nil {
			f.h.t.Errorf("registration notice: %v", err)
			return
		}
		ch <- n
	})
	if err != nil {
		f.h.t.Fatal(err)
	}
	f.h.flush()
	return ch
}

// next returns the next notice, failing after within.
func next(t *testing.T, ch chan protocol.RegistrationNotice, within time.Duration, what string) protocol.RegistrationNotice {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(within):
		t.Fatalf("no %s within %v", what, within)
		return protocol.RegistrationNotice{}
	}
}

// complete reports whether f's row says what its registration does.
func (h *harness) complete(f *fake) bool {
	w, ok := h.worker(f.id)
	return ok && w.Status == store.WorkerOnline && len(w.Types) == 1 && w.Hostname == "fake" && w.PID == 7 && w.MaxConcurrency == 4
}

// A worker the leader knows only from its heartbeats is asked to register,
// with a backoff while it does not; its registration, once written, is
// acknowledged, and so is a repetition of it; asks stop once it is
// written.
func TestWorkerKnownFromHeartbeatsIsAskedToRegister(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	r := h.reaper(reaper.Knobs{}, func(c *reaper.Config) { c.WorkerTimeout = 10 * time.Second }, nil)
	waitLeader(t, r)
	f := h.fake()
	notices := f.notices()

	// Silent on registration for 2.5 s: asked at once, then after 1 s and
	// 2 s more (the backoff), not on every heartbeat.
	stop := f.beatEvery(50 * time.Millisecond)
	n := next(t, notices, 5*time.Second, "ask")
	if !n.Ask || n.WorkerID != f.id || n.Namespace != f.ns {
		t.Fatalf("first notice %+v, want an ask to %s", n, f.id)
	}
	time.Sleep(2500 * time.Millisecond)
	asks := 1 + len(notices)
	if asks < 2 || asks > 3 {
		t.Errorf("%d asks in 2.5 s of heartbeats every 50 ms, want 2 or 3 (1 s, then 2 s apart)", asks)
	}
	for len(notices) > 0 {
		if n := <-notices; !n.Ask {
			t.Errorf("acknowledged %+v before any registration", n)
		}
	}

	f.register()
	h.flush()
	if n := next(t, notices, 5*time.Second, "acknowledgement"); n.Ask {
		t.Fatalf("notice %+v after the registration, want an acknowledgement", n)
	}
	if !h.complete(f) {
		w, _ := h.worker(f.id)
		t.Fatalf("acknowledged before the row was complete: %+v", w)
	}
	// Repeated (its acknowledgement was lost): acknowledged again, from
	// memory.
	written := r.Stats().Registered
	f.register()
	h.flush()
	if n := next(t, notices, 5*time.Second, "second acknowledgement"); n.Ask {
		t.Fatalf("notice %+v after the repeated registration", n)
	}
	if got := r.Stats().Registered; got != written {
		t.Errorf("a repeated registration wrote the row again (%d writes, were %d)", got, written)
	}
	// Heartbeats go on past the ask backoff: no ask.
	time.Sleep(2500 * time.Millisecond)
	stop()
	if len(notices) > 0 {
		t.Errorf("notice %+v after the registration was written", <-notices)
	}
	st := settled(t, r, "counted", func(s reaper.Stats) bool { return s.RegistrationAcks >= 2 })
	if st.RegistrationAsks != int64(asks) {
		t.Errorf("stats count %d asks, the worker heard %d", st.RegistrationAsks, asks)
	}
}

// A reaper announces itself when it takes over: workers holding no
// acknowledgement register at once.
func TestLeaderAnnouncesItself(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ups := make(chan *nats.Msg, 16)
	if _, err := h.pub.ChanSubscribe(protocol.SubjectReaperUp, ups); err != nil {
		t.Fatal(err)
	}
	h.flush()
	r := h.reaper(reaper.Knobs{}, nil, nil)
	waitLeader(t, r)
	select {
	case m := <-ups:
		var up protocol.ReaperUp
		if err := protocol.Decode(m.Data, &up); err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not announce itself")
	}
	settled(t, r, "announcement counted", func(s reaper.Stats) bool { return s.Announcements == 1 })
}

// A standby heard a worker's registration that the leader did not (the
// leader started after it) and that leader wrote the worker's row from
// its heartbeats alone. When the standby takes over, it writes the
// registration it heard over that row, and acknowledges it.
func TestTakeoverCompletesARowWrittenFromHeartbeats(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The test holds the reaper's lock: the reaper under test is a
	// standby until the test lets go.
	key := reaper.LockKey + 7
	held, release := make(chan struct{}), make(chan struct{})
	leaderCtx, stopLeader := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l := &pgsession.Leader{URL: h.url, LockKey: key, Lead: func(ctx context.Context, _ int64) error {
			close(held)
			select {
			case <-release:
			case <-ctx.Done():
			}
			stopLeader()
			return nil
		}}
		_ = l.Run(leaderCtx)
	}()
	<-held
	r := h.reaper(reaper.Knobs{LockKey: key}, func(c *reaper.Config) { c.WorkerTimeout = 10 * time.Second }, nil)
	f := h.fake()
	notices := f.notices()
	f.register()
	f.beat(false)
	h.flush()
	settled(t, r, "registration heard", func(s reaper.Stats) bool { return s.Registers == 1 && s.Heartbeats == 1 })
	// The row the other leader wrote from heartbeats.
	if _, err := h.st.WorkersRegister(ctx, store.WorkersRegisterParams{WorkerID: f.id, Namespace: f.ns, Queue: f.queue, MaxConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	if r.IsLeader() {
		t.Fatal("the reaper leads while the test holds its lock")
	}
	close(release)
	<-done
	waitLeader(t, r)
	stop := f.beatEvery(100 * time.Millisecond)
	defer stop()
	eventually(t, 5*time.Second, "row complete", func() bool { return h.complete(f) })
	if n := next(t, notices, 5*time.Second, "acknowledgement"); n.Ask {
		t.Fatalf("notice %+v, want an acknowledgement", n)
	}
	if r.Stats().RegistrationAsks != 0 {
		t.Error("asked a worker whose registration it knew")
	}
}
