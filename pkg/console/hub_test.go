package console

import (
	"testing"
	"time"
)

// TestSlowBrowserGetsResync: a browser whose buffer is full is skipped
// (it is kicked to send a resync) while the others get every event, and
// the broadcast never blocks.
func TestSlowBrowserGetsResync(t *testing.T) {
	h := newHub(nil, nil, time.Millisecond)
	st := &nsState{clients: map[*sseClient]struct{}{}}
	slow := &sseClient{ch: make(chan event, 2), kick: make(chan struct{}, 1)}
	fast := &sseClient{ch: make(chan event, 100), kick: make(chan struct{}, 1)}
	st.clients[slow], st.clients[fast] = struct{}{}, struct{}{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10 {
			h.broadcastLocked(st, "run", []byte(`{}`))
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a slow browser blocked the broadcast")
	}
	if len(fast.ch) != 10 {
		t.Fatalf("fast browser got %d events, want 10", len(fast.ch))
	}
	if !slow.overflow || len(slow.ch) != 2 {
		t.Fatalf("slow browser: overflow %v with %d events", slow.overflow, len(slow.ch))
	}
	select {
	case <-slow.kick:
	default:
		t.Fatal("slow browser was not told to resync")
	}
	if got := st.ring[len(st.ring)-1].seq; got != 10 {
		t.Fatalf("ring ends at %d, want 10 (kept for reconnects)", got)
	}
}
