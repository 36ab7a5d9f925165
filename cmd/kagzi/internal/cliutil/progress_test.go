package cliutil

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }
func redraws(s string) []string          { return strings.Split(s, "\r")[1:] }
func trimmed(ss []string) (out []string) {
	for _, s := range ss {
		nl := strings.HasSuffix(s, "\n")
		s = strings.TrimRight(strings.TrimSuffix(s, "\n"), " ")
		if nl {
			s += "\n"
		}
		out = append(out, s)
	}
	return out
}

func TestProgressLineCountRateETA(t *testing.T) {
	c := newFakeClock()
	var w bytes.Buffer
	p := NewProgress(&w, "exporting runs", 1000, c.now)
	p.Add(10) // within the first ProgressEvery: nothing drawn yet
	if w.Len() != 0 {
		t.Fatalf("drew before ProgressEvery: %q", w.String())
	}
	c.add(2 * time.Second)
	p.Add(190) // 200 in 2 s: 100/s, 800 left: 8 s
	c.add(8 * time.Second)
	p.Add(800)
	p.Done(-1)
	got := trimmed(redraws(w.String()))
	want := []string{
		"exporting runs: 200/1000 (20%), 100/s, ETA 8.0s, 2.0s",
		"exporting runs: 1000/1000 (100%), 100/s, ETA 0s, 10s",
		"exporting runs: 1000 in 10s (100/s)\n",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines:\n got %q\nwant %q", got, want)
	}
	if !strings.HasSuffix(w.String(), "\n") || strings.Count(w.String(), "\n") != 1 {
		t.Fatalf("want one newline, at the end: %q", w.String())
	}
}

func TestProgressUnknownTotalAndSlowRate(t *testing.T) {
	c := newFakeClock()
	var w bytes.Buffer
	p := NewProgress(&w, "forking runs", 0, c.now)
	c.add(4 * time.Second)
	p.Add(3)
	got := trimmed(redraws(w.String()))
	if len(got) != 1 || got[0] != "forking runs: 3, 0.8/s, 4.0s" {
		t.Fatalf("line %q, want the count, a one-decimal rate and no ETA", got)
	}
	p.SetTotal(6)
	c.add(time.Second)
	p.Tick()
	if l := trimmed(redraws(w.String())); l[len(l)-1] != "forking runs: 3/6 (50%), 0.6/s, ETA 5.0s, 5.0s" {
		t.Fatalf("after SetTotal: %q", l[len(l)-1])
	}
}

func TestProgressThrottles(t *testing.T) {
	c := newFakeClock()
	var w bytes.Buffer
	p := NewProgress(&w, "x", 0, c.now)
	c.add(time.Second)
	for i := 0; i < 1000; i++ { // 1000 adds in 1 s: at most 4 redraws a second
		p.Add(1)
		c.add(time.Millisecond)
	}
	if n := len(redraws(w.String())); n < 4 || n > 5 {
		t.Fatalf("%d redraws over 1 s of adds, want 4 (ProgressEvery %v)", n, ProgressEvery)
	}
}

func TestProgressBlanksLongerLineAndEndsOnce(t *testing.T) {
	c := newFakeClock()
	var w bytes.Buffer
	p := NewProgress(&w, "x", 0, c.now)
	c.add(time.Minute)
	p.Add(123456789)
	first := redraws(w.String())[0]
	w.Reset()
	p.Done(5)
	p.Done(7)
	p.Add(1)
	final := w.String()
	if !strings.HasPrefix(final, "\rx: 5 in 1m0s (0.1/s)") || len(final) != len("\r")+len(first)+len("\n") {
		t.Fatalf("final %q after %q: want the count set by Done, blanked to the old line's width, and nothing after", final, first)
	}
}

// signalWriter collects what is written and closes first at the first
// write.
type signalWriter struct {
	mu    sync.Mutex
	b     bytes.Buffer
	first chan struct{}
}

func (s *signalWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() == 0 {
		close(s.first)
	}
	return s.b.Write(p)
}

func TestProgressStartTicks(t *testing.T) {
	w := &signalWriter{first: make(chan struct{})}
	p := NewProgress(w, "migrating", 0, time.Now)
	p.start = p.start.Add(-time.Second) // the first redraw is due
	p.Start()
	select {
	case <-w.first: // the ticker drew while nothing was added
	case <-time.After(10 * time.Second):
		t.Fatal("Start drew nothing in 10 s")
	}
	p.Done(1)
	w.mu.Lock()
	out := w.b.String()
	w.mu.Unlock()
	if !strings.HasPrefix(out, "\rmigrating: 0, ") || !strings.Contains(out, "\rmigrating: 1 in ") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("output %q: want a ticked line, then the final one", out)
	}
}

func TestProgressNilAndEnv(t *testing.T) {
	var p *Progress
	p.Add(1)
	p.Tick()
	p.Start()
	p.Done(1) // a nil line does nothing, and does not panic
	if IsTerminal(&bytes.Buffer{}) {
		t.Fatal("a buffer is no terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Fatal("a regular file is no terminal")
	}
}

// A total learnt in parts (a bench's rounds) grows as each part begins.
func TestProgressAddTotal(t *testing.T) {
	c := newFakeClock()
	var w bytes.Buffer
	p := NewProgress(&w, "bench, runs", 0, c.now)
	p.AddTotal(100)
	c.add(time.Second)
	p.Add(100) // 100/100 in 1 s
	p.AddTotal(300)
	c.add(time.Second)
	p.Add(100) // 200/400 in 2 s: 100/s, 200 left: 2 s
	got := trimmed(redraws(w.String()))
	want := []string{
		"bench, runs: 100/100 (100%), 100/s, ETA 0s, 1.0s",
		"bench, runs: 200/400 (50%), 100/s, ETA 2.0s, 2.0s",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines:\n got %q\nwant %q", got, want)
	}
}
