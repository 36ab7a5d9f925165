package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// kagzi dev serves /healthz, /readyz and /metrics like each service: ready
// once everything runs, with the engine's metrics and the Go runtime's.
func TestDevServesHealthAndMetrics(t *testing.T) {
	d := startDev(t)
	get := d.get
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
	// A queue's depth is reported once its worker's registration has reached
	// the reaper, which may come after readiness (the worker registers over
	// NATS), so the scrape is repeated until every name is there.
	wants := []string{"kagzi_queue_depth{", "kagzi_relay_leader{", "kagzi_workers_online{", "go_goroutines", "process_cpu_seconds_total"}
	for {
		code, body := get("/metrics")
		var missing []string
		for _, want := range wants {
			if code != http.StatusOK || !strings.Contains(body, want) {
				missing = append(missing, want)
			}
		}
		if len(missing) == 0 {
			break
		}
		select {
		case <-d.ctx.Done():
			t.Fatalf("/metrics (%d) never had %v", code, missing)
		case <-time.After(50 * time.Millisecond):
		}
	}
	d.stop()
}

// devServer is `kagzi dev` running in the test, ready.
type devServer struct {
	t            *testing.T
	ctx          context.Context
	cancel       context.CancelFunc
	addr         string
	url, natsURL string
	// console is the web console's URL (its HTTP API is the README's
	// curl example's KAGZI_CONSOLE).
	console string
	done    chan int
}

// startDev runs `kagzi dev` with one worker and waits until it is ready.
// The test's environment gets its HTTP address, so the test must not run
// in parallel.
func startDev(t *testing.T) *devServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	t.Setenv("KAGZI_HTTP_ADDR", addr)
	cln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	caddr := cln.Addr().String()
	_ = cln.Close()
	d := &devServer{t: t, addr: addr, url: testdb.New(t), natsURL: testnats.Start(t).URL(), done: make(chan int, 1), console: "http://" + caddr}
	// Bounded by the test binary's timeout rather than a short one of its
	// own: the README's and docs' shell blocks run against one dev server,
	// more than two minutes under -race on a loaded machine.
	d.ctx, d.cancel = context.WithTimeout(context.Background(), 12*time.Minute)
	t.Cleanup(d.cancel)
	var out, errb strings.Builder
	go func() {
		d.done <- execute(d.ctx, []string{"--database-url", d.url, "--nats-url", d.natsURL, "dev", "--workers", "1", "--console-addr", caddr},
			strings.NewReader(""), &lockedBuilder{b: &out}, &lockedBuilder{b: &errb})
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if code, _ := d.get("/readyz"); code == http.StatusOK {
			return d
		}
		select {
		case code := <-d.done:
			t.Fatalf("kagzi dev exited %d before it was ready", code)
		case <-d.ctx.Done():
			t.Fatal("kagzi dev never became ready")
		case <-tick.C:
		}
	}
}

// get fetches path from dev's HTTP address.
func (d *devServer) get(path string) (int, string) {
	resp, err := http.Get("http://" + d.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// stop ends `kagzi dev` and checks it exits 0.
func (d *devServer) stop() {
	d.t.Helper()
	d.cancel()
	if code := <-d.done; code != 0 {
		d.t.Fatalf("kagzi dev exited %d", code)
	}
}

// The example Cart, which kagzi dev serves, answers updates and fills a
// state and a stream, so each of those commands can be tried at once.
func TestDevServesCartWithStateStreamAndUpdates(t *testing.T) {
	d := startDev(t)
	c := &cli{t: t, url: d.url}
	nats := []string{"--nats-url", d.natsURL}
	var s startJSON
	c.okJSON(&s, append(nats, "run", "start", "Cart", "--input", `{"items": 2}`)...)
	for _, it := range []string{`{"sku": "A-1", "price": 10}`, `{"sku": "B-2", "price": 20}`} {
		c.ok(append(nats, "run", "update", s.RunID, "AddToCart", "--payload", it, "--timeout", "30s")...)
	}
	out := c.ok(append(nats, "run", "state", s.RunID, "cart")...)
	mustContain(t, "run state", out, `"total":30`)
	out = c.ok(append(nats, "run", "stream", s.RunID, "items", "--follow")...)
	mustContain(t, "run stream", out, `"A-1"`, `"B-2"`)
	d.stop()
}

// lockedBuilder is a strings.Builder safe to write from the command's
// goroutines and read from the test's.
type lockedBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
