package worker_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

func registerEcho(t *testing.T) func(w *worker.Worker) {
	return func(w *worker.Worker) {
		must(t, worker.Register(w, "Echo", func(ctx workflow.Context, in int) (int, error) {
			return workflow.Step(ctx, "double", func(context.Context) (int, error) { return 2 * in, nil })
		}))
	}
}

// A run's slot is free once its end report is handed to its sender, before
// the dispatcher acknowledges it (one slot: a second run starts), the run
// stays listed in heartbeats (its lease holds), its outcome counts once
// acknowledged, and Stop waits for every acknowledgement.
func TestSlotFreedBeforeEndIsAcknowledged(t *testing.T) {
	t.Parallel()
	// A report attempt outlasts the test: the held replies answer the
	// first attempts.
	d, w := start(t, worker.Config{MaxConcurrency: 1, DrainTimeout: waitLimit, HeartbeatInterval: time.Hour,
		ReportTimeout: time.Minute}, registerEcho(t))
	d.setHold(func(it protocol.ReportItem) bool { return it.Kind == protocol.ReportRunCompleted })

	req := d.nextRequest(t)
	first := newRun(t, "Echo", 1)
	if !d.deliver(t, req, req.Seq, first) {
		t.Fatal("first delivery refused")
	}
	end1 := recv(t, d.parked, "the first run's end report")
	if k := end1.items[len(end1.items)-1]; k.RunID != first.RunID || len(end1.items) != 2 || end1.items[0].StepID != "double" {
		t.Fatalf("first end report %+v", end1.items)
	}
	// The slot is free although the end is not acknowledged.
	req2 := d.nextRequest(t)
	if req2.Credits != 1 {
		t.Fatalf("second request credits %d", req2.Credits)
	}
	second := newRun(t, "Echo", 2)
	if !d.deliver(t, req2, req2.Seq, second) {
		t.Fatal("second delivery refused")
	}
	// The heartbeat announcing the second run lists the first, whose end
	// is not recorded yet.
	for {
		hb := recv(t, d.heartbeats, "the heartbeat announcing the second run")
		if slices.Contains(hb.Runs, second.RunID) {
			if !sameIDs(hb.Runs, []uuid.UUID{first.RunID, second.RunID}) {
				t.Fatalf("heartbeat %+v", hb)
			}
			break
		}
	}
	if st := w.Stats(); st.RunsCompleted != 0 {
		t.Fatalf("stats before the acknowledgement %+v", st)
	}
	// At most MaxConcurrency end reports are pending: the second run's
	// waits for the first's acknowledgement, holding its slot, so the
	// worker asks for nothing more meanwhile.
	requests := func() (n int) {
		for _, e := range d.eventLog() {
			if e.kind == "request" {
				n++
			}
		}
		return n
	}
	if n := requests(); n != 2 {
		t.Fatalf("%d work requests with one end pending and one run waiting to end", n)
	}
	end1.respond(t)
	end2 := recv(t, d.parked, "the second run's end report")
	if it := end2.items[len(end2.items)-1]; it.RunID != second.RunID || it.Kind != protocol.ReportRunCompleted {
		t.Fatalf("second end report %+v", end2.items)
	}
	d.nextRequest(t) // the second run's slot is free too

	stopped := make(chan struct{})
	go func() {
		w.Stop()
		close(stopped)
	}()
	if hb := recv(t, d.heartbeats, "draining heartbeat"); !hb.Draining || !sameIDs(hb.Runs, []uuid.UUID{second.RunID}) {
		t.Fatalf("drain heartbeat %+v", hb)
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while an end report was pending")
	default:
	}
	end2.respond(t)
	closed(t, stopped, "Stop")
	recv(t, d.deregs, "deregister")
	if st := w.Stats(); st.RunsCompleted != 2 || st.RunsAbandoned != 0 || st.ReportRetries != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// An end report refused (invalid, the lease lost, or events arrived and
// the run executes again) abandons the run as any refused report does: it
// is not counted completed, and nothing more is reported for it.
func TestRefusedEndReportAbandonsRun(t *testing.T) {
	t.Parallel()
	for _, code := range []protocol.ResultCode{protocol.ResultInvalid, protocol.ResultLeaseLost, protocol.ResultRerun} {
		t.Run(string(code), func(t *testing.T) {
			t.Parallel()
			d, w := start(t, worker.Config{MaxConcurrency: 1, DrainTimeout: waitLimit, HeartbeatInterval: time.Hour}, registerEcho(t))
			d.setAnswer(func(it protocol.ReportItem) protocol.ResultCode {
				if it.Kind == protocol.ReportRunCompleted {
					return code
				}
				return protocol.ResultOK
			})
			req := d.nextRequest(t)
			d.deliver(t, req, req.Seq, newRun(t, "Echo", 1))
			if it := d.nextItem(t); it.StepID != "double" {
				t.Fatalf("first item %+v", it)
			}
			if it := d.nextItem(t); it.Kind != protocol.ReportRunCompleted {
				t.Fatalf("second item %+v", it)
			}
			// The drain waits for the end report's outcome.
			w.Stop()
			d.noItems(t)
			if st := w.Stats(); st.RunsAbandoned != 1 || st.RunsCompleted != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}
