package reaper_test

import (
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/services/reaper"
)

// The leader folds attribute count deltas a few seconds after a wakeup
// tells it of starts, and at no other time: an idle reaper runs no
// statement for them. The counts read the same before and after.
func TestAttributeCountsFoldedAfterStarts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	if err := h.st.AttributesDeclare(t.Context(), "default", "customer", store.AttributeKeyword); err != nil {
		t.Fatal(err)
	}
	start := func(cust string) {
		t.Helper()
		if _, _, err := h.st.RunsCreate(t.Context(), store.RunsCreateParams{Namespace: "default", Queue: "q", Type: "T",
			Attributes: map[string]any{"customer": cust}}); err != nil {
			t.Fatal(err)
		}
	}
	start("c") // while nobody leads
	k := h.clocked(nil)
	r, c := k.r, k.c
	k.settle()
	// Taking over folds what piled up while nobody led.
	st := settled(t, r, "the fold of a new term", func(s reaper.Stats) bool { return s.AttributeFolds == 1 })
	if st.AttributeDeltasFolded != 1 {
		t.Fatalf("folded %d deltas at the takeover, want 1", st.AttributeDeltasFolded)
	}
	for _, cust := range []string{"a", "a", "b"} {
		start(cust)
	}
	count := func() string {
		t.Helper()
		_, groups, err := h.st.RunsCountQuery(t.Context(), "default", "", "customer")
		if err != nil {
			t.Fatal(err)
		}
		out := ""
		for _, g := range groups {
			out += *g.Value + "=" + string(rune('0'+g.Count)) + " "
		}
		return out
	}
	if got := count(); got != "a=2 b=1 c=1 " {
		t.Fatalf("counts before the fold: %q", got)
	}
	// An hour without news: no fold.
	c.Advance(time.Hour)
	k.settle()
	if st := r.Stats(); st.AttributeFolds != 1 {
		t.Fatalf("%d folds without news of work, want 1", st.AttributeFolds)
	}
	data, err := protocol.Encode(&protocol.Wakeup{Namespace: "default", Queue: "q", AvailableAt: c.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.pub.Publish(protocol.SubjectReady("default", "q"), data); err != nil {
		t.Fatal(err)
	}
	h.flush()
	settled(t, r, "the wakeup heard", func(s reaper.Stats) bool { return s.Wakeups >= 1 })
	k.settle()
	if st := r.Stats(); st.AttributeFolds != 1 {
		t.Fatalf("folded at once after the wakeup (%d folds), want a delay", st.AttributeFolds)
	}
	c.Advance(6 * time.Second)
	k.settle()
	st = settled(t, r, "the fold after the wakeup", func(s reaper.Stats) bool { return s.AttributeFolds == 2 })
	if st.AttributeDeltasFolded != 4 {
		t.Fatalf("folded %d deltas, want 4 (one per start's statement)", st.AttributeDeltasFolded)
	}
	if got := count(); got != "a=2 b=1 c=1 " {
		t.Fatalf("counts after the fold: %q", got)
	}
}
