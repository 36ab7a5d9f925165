package dispatcher

import (
	"testing"

	"github.com/google/uuid"
)

func TestPublishedTakesOnceAndForgets(t *testing.T) {
	var nilP *Published
	nilP.add(uuid.New(), "COMPLETED")
	if nilP.take(uuid.New(), "COMPLETED") {
		t.Fatal("a nil Published remembered a run")
	}
	p := NewPublished()
	a := uuid.New()
	p.add(a, "COMPLETED")
	if p.take(a, "FAILED") {
		t.Fatal("took another status")
	}
	if !p.take(a, "COMPLETED") || p.take(a, "COMPLETED") {
		t.Fatal("want one take of an announced end")
	}
	// An entry nobody takes is forgotten after two generations.
	p.add(a, "COMPLETED")
	for i := 0; i < 2*publishedCap; i++ {
		p.add(uuid.New(), "COMPLETED")
	}
	if p.take(a, "COMPLETED") {
		t.Fatal("an old entry was kept")
	}
	if len(p.cur)+len(p.prev) > 2*publishedCap {
		t.Fatalf("%d entries kept", len(p.cur)+len(p.prev))
	}
}

// Whichever of the dispatcher and the relay of a process comes first
// announces a run's end; the other skips it. A nil Published announces
// every time; an end whose publish failed is left for the other side.
func TestPublishedOnceEitherOrder(t *testing.T) {
	// The dispatcher and the relay both call once: the first call
	// announces, whichever side makes it, and the second skips.
	p := NewPublished()
	run := uuid.New()
	sent := 0
	publish := func() bool { sent++; return true }
	if p.once(run, "COMPLETED", publish) {
		t.Fatal("the first side skipped")
	}
	if !p.once(run, "COMPLETED", publish) || sent != 1 {
		t.Fatalf("the second side announced too (%d sent)", sent)
	}
	// A later end of the same run (retried, failed again) is another.
	if p.once(run, "FAILED", publish) || sent != 2 {
		t.Fatal("another status was skipped")
	}
	var nilP *Published
	sent = 0
	for range 2 {
		nilP.once(uuid.New(), "COMPLETED", func() bool { sent++; return true })
	}
	if sent != 2 {
		t.Fatalf("a nil Published sent %d of 2", sent)
	}
	p, run = NewPublished(), uuid.New()
	p.once(run, "COMPLETED", func() bool { return false })
	if p.once(run, "COMPLETED", func() bool { return true }) {
		t.Fatal("an end whose publish failed was skipped by the other side")
	}
}
