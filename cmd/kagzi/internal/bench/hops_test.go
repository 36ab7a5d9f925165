package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/hops"
)

// The services' hop files join with the bench's own marks by run id; a
// run whose recorded wakeup came before it was started (another run's)
// counts for no hop beside the wakeup's, and a hop either end of which is
// missing counts for nothing.
func TestHopStatsJoinsFilesByRun(t *testing.T) {
	dir := t.TempDir()
	a, b := uuid.New(), uuid.New()
	relay, err := hops.Open(dir, "dispatcher")
	if err != nil {
		t.Fatal(err)
	}
	worker, err := hops.Open(dir, "worker")
	if err != nil {
		t.Fatal(err)
	}
	const ms = int64(1e6)
	for _, m := range []struct {
		id  uuid.UUID
		hop string
		at  int64
	}{
		{a, hops.Notified, 10 * ms}, {a, hops.Relayed, 11 * ms}, {a, hops.Woken, 12 * ms},
		{a, hops.Claiming, 13 * ms}, {a, hops.Claimed, 15 * ms}, {a, hops.Delivered, 16 * ms},
		// b's claim recorded a's wakeup, which came before b was started.
		{b, hops.Notified, 10 * ms}, {b, hops.Relayed, 11 * ms}, {b, hops.Woken, 12 * ms},
		{b, hops.Claiming, 103 * ms}, {b, hops.Claimed, 105 * ms}, {b, hops.Delivered, 106 * ms},
	} {
		relay.Mark(m.id, m.hop, m.at)
	}
	worker.Mark(a, hops.Received, 17*ms)
	worker.Mark(a, hops.Executing, 18*ms)
	worker.Mark(a, hops.Received, 30*ms) // a second delivery: the first counts
	worker.Mark(b, hops.Received, 107*ms)
	if err := relay.Close(); err != nil {
		t.Fatal(err)
	}
	if err := worker.Close(); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.hops")); len(files) != 2 {
		t.Fatalf("%d hop files, want one per process", len(files))
	}
	got, err := joinHops(dir, []hopRun{
		{id: a, started: 8 * ms, committed: 10 * ms, running: 19 * ms},
		{id: b, started: 100 * ms, committed: 102 * ms, running: 0},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the hop directory is left behind: %v", err)
	}
	want := map[[2]string]HopStat{
		{hops.Started, hops.Committed}:  {Runs: 2, P50ms: 2, P99ms: 2},
		{hops.Committed, hops.Notified}: {Runs: 1, P50ms: 0, P99ms: 0},
		{hops.Notified, hops.Relayed}:   {Runs: 1, P50ms: 1, P99ms: 1},
		{hops.Relayed, hops.Woken}:      {Runs: 1, P50ms: 1, P99ms: 1},
		{hops.Woken, hops.Claiming}:     {Runs: 1, P50ms: 1, P99ms: 1},
		{hops.Claiming, hops.Claimed}:   {Runs: 2, P50ms: 2, P99ms: 2},
		{hops.Claimed, hops.Delivered}:  {Runs: 2, P50ms: 1, P99ms: 1},
		{hops.Delivered, hops.Received}: {Runs: 2, P50ms: 1, P99ms: 1},
		{hops.Received, hops.Executing}: {Runs: 1, P50ms: 1, P99ms: 1},
		{hops.Executing, hops.Running}:  {Runs: 1, P50ms: 1, P99ms: 1},
		{hops.Committed, hops.Running}:  {Runs: 1, P50ms: 9, P99ms: 9},
	}
	if len(got) != len(want) {
		t.Fatalf("%d hops, want %d: %+v", len(got), len(want), got)
	}
	for _, h := range got {
		w, ok := want[[2]string{h.From, h.To}]
		if !ok || h.Runs != w.Runs || h.P50ms != w.P50ms || h.P99ms != w.P99ms {
			t.Errorf("hop %s → %s: %d runs, p50 %v, p99 %v; want %+v", h.From, h.To, h.Runs, h.P50ms, h.P99ms, w)
		}
	}
}

// Off, a recorder is nil: it records nothing, reads no clock and closes.
func TestHopsOffIsNil(t *testing.T) {
	r, err := hops.Open("", "dispatcher")
	if err != nil || r != nil {
		t.Fatalf("Open(\"\") = %v, %v; want nil, nil", r, err)
	}
	r.Mark(uuid.New(), hops.Claimed, 1)
	if r.Now() != 0 || r.Enabled() {
		t.Fatal("a nil recorder reads the clock")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// A recorder may be closed twice (Stop paths run more than once); what it
// marked before is in its file either way.
func TestHopsCloseTwice(t *testing.T) {
	dir := t.TempDir()
	r, err := hops.Open(dir, "worker")
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	r.Mark(id, hops.Received, 42)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	got, err := hops.Read(dir)
	if err != nil || got[id][hops.Received] != 42 {
		t.Fatalf("read %v, %v; want the mark", got, err)
	}
}
