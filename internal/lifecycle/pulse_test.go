package lifecycle

import (
	"context"
	"testing"
	"time"
)

// A stall is reported while it goes on (the ticker has not run since the
// process resumed) and after it ended (the ticker saw the gap), to a
// caller whose state predates it, and not to one whose state is newer.
func TestPulseReportsStalls(t *testing.T) {
	p := NewPulse(10 * time.Millisecond)
	if p.StalledSince(time.Time{}, time.Millisecond) {
		t.Fatal("a pulse not started reports a stall")
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	before := time.Now()
	if p.StalledSince(before, time.Second) {
		t.Fatal("stall reported for a running process")
	}
	// As if the process had been stopped for two seconds just now: the
	// last tick is two seconds old.
	p.mu.Lock()
	p.last = time.Now().Add(-2 * time.Second)
	p.mu.Unlock()
	if !p.StalledSince(before, time.Second) {
		t.Fatal("stall going on not reported")
	}
	p.beat(time.Now())
	if !p.StalledSince(before, time.Second) {
		t.Fatal("stall that ended not reported to state older than it")
	}
	if p.StalledSince(before, 3*time.Second) {
		t.Fatal("a 2 s stall reported as longer than 3 s")
	}
	if p.StalledSince(time.Now(), time.Second) {
		t.Fatal("stall reported to state newer than it")
	}
	var nilPulse *Pulse
	if nilPulse.StalledSince(before, 0) {
		t.Fatal("a nil pulse reports a stall")
	}
	p.Stop()
}
