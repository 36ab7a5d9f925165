package console

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
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

// TestSlowBrowserResyncOverHTTP: over real sockets, a browser that stops
// reading while updates flow holds none of them up (another browser gets
// each event before the next is sent), and when it reads again it is told
// to resync.
func TestSlowBrowserResyncOverHTTP(t *testing.T) {
	h := newHub(nil, nil, time.Millisecond)
	loaded := make(chan struct{})
	close(loaded)
	st := &nsState{ns: "default", loaded: loaded, pending: map[uuid.UUID]struct{}{},
		recent: map[uuid.UUID]recentRun{}, clients: map[*sseClient]struct{}{}, counts: map[store.RunStatus]int64{}}
	h.ns["default"] = st
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serveSSE(w, r, "default") }))
	defer srv.Close()

	// The slow browser: a small receive buffer, so the server's writes
	// block soon once it stops reading.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	slow, err := d.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if _, err := fmt.Fprintf(slow, "GET /stream HTTP/1.1\r\nHost: console\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	slowR := bufio.NewReader(slow)
	readUntil := func(r *bufio.Reader, line string) error {
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			if strings.TrimSpace(l) == line {
				return nil
			}
		}
	}
	_ = slow.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := readUntil(slowR, "event: counts"); err != nil {
		t.Fatalf("slow browser's first event: %v", err)
	}

	// The other browser reads every event and reports its id.
	resp, err := http.Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ids := make(chan uint64, 16)
	go func() {
		defer close(ids)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
				n, _ := strconv.ParseUint(v, 10, 64)
				ids <- n
			}
		}
	}()
	if _, ok := <-ids; !ok { // its initial counts: it is registered
		t.Fatal("fast browser's stream ended")
	}

	payload := []byte(`{"pad":"` + strings.Repeat("x", 32<<10) + `"}`)
	overflowed := false
	for i := 0; i < 4000 && !overflowed; i++ {
		h.mu.Lock()
		h.broadcastLocked(st, "run", payload)
		seq := st.seq
		for cl := range st.clients {
			overflowed = overflowed || cl.overflow
		}
		h.mu.Unlock()
		select {
		case got, ok := <-ids:
			if !ok || got != seq {
				t.Fatalf("fast browser got event %d (open %v), want %d", got, ok, seq)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("fast browser delayed: event %d not seen in 5 s while the other browser stalls", seq)
		}
	}
	if !overflowed {
		t.Fatal("the stalled browser never overflowed")
	}
	// Reading again, the stalled browser is told to resync.
	_ = slow.SetReadDeadline(time.Now().Add(20 * time.Second))
	if err := readUntil(slowR, "event: resync"); err != nil {
		t.Fatalf("stalled browser, reading again, got no resync: %v", err)
	}
}
