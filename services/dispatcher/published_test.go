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
