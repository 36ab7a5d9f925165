// Package hops records when each run passes the hops of its dispatch
// (Postgres NOTIFY → relay → NATS → dispatcher → claim → delivery →
// worker → workflow code), for `kagzi bench --scenario latency --hops`. It
// is a diagnostic, off unless KAGZI_HOPS_DIR names a directory: every
// process then appends lines "<id> <hop> <unix ns>" to a file of its own
// there, and the bench joins the files by run id (all processes read one
// clock). Off, a Recorder is nil and every method returns at once.
package hops

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Hop names, in the order a run passes them.
const (
	Started   = "started"   // the client called Start (bench)
	Committed = "committed" // Start returned: the run is committed (bench)
	Notified  = "notified"  // the relay received the NOTIFY
	Relayed   = "relayed"   // the relay published the wakeup
	Woken     = "woken"     // the dispatcher received the wakeup
	Claiming  = "claiming"  // the claim statement was sent
	Claimed   = "claimed"   // the claim returned
	Delivered = "delivered" // the delivery was published
	Received  = "received"  // the worker received the delivery
	Executing = "executing" // the run's goroutine began its execution
	Running   = "running"   // the workflow code ran (bench: Probe's output)
)

// Order is every hop in path order.
var Order = []string{Started, Committed, Notified, Relayed, Woken, Claiming, Claimed, Delivered, Received, Executing, Running}

// flushEvery bounds what a killed process loses.
const flushEvery = 200 * time.Millisecond

// Recorder appends hop lines to one file. A nil *Recorder records nothing.
type Recorder struct {
	once sync.Once
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	stop chan struct{}
	done chan struct{}
}

// Open returns a recorder writing to a new file in dir named after name
// and the process id, or nil when dir is "".
func Open(dir, name string) (*Recorder, error) {
	if dir == "" {
		return nil, nil
	}
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.hops", name, os.Getpid()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("hops: %w", err)
	}
	r := &Recorder{f: f, w: bufio.NewWriterSize(f, 1<<16), stop: make(chan struct{}), done: make(chan struct{})}
	go r.flushLoop()
	return r, nil
}

// Enabled reports whether r records.
func (r *Recorder) Enabled() bool { return r != nil }

// Mark records that run id passed hop at unix nanoseconds ns.
func (r *Recorder) Mark(id uuid.UUID, hop string, ns int64) {
	if r == nil {
		return
	}
	var b [96]byte
	line := id.String()
	out := append(b[:0], line...)
	out = append(out, ' ')
	out = append(out, hop...)
	out = append(out, ' ')
	out = strconv.AppendInt(out, ns, 10)
	out = append(out, '\n')
	r.mu.Lock()
	_, _ = r.w.Write(out)
	r.mu.Unlock()
}

// Now is time.Now in unix nanoseconds, or 0 when r records nothing, so
// that a disabled path reads no clock.
func (r *Recorder) Now() int64 {
	if r == nil {
		return 0
	}
	return time.Now().UnixNano()
}

func (r *Recorder) flushLoop() {
	defer close(r.done)
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.mu.Lock()
			_ = r.w.Flush()
			r.mu.Unlock()
		}
	}
}

// Close flushes and closes the file; safe on nil and safe twice (the
// second call returns nil).
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	var err error
	r.once.Do(func() {
		close(r.stop)
		<-r.done
		r.mu.Lock()
		defer r.mu.Unlock()
		err = r.w.Flush()
		if cerr := r.f.Close(); err == nil {
			err = cerr
		}
	})
	return err
}

// Read joins every file of dir: for each id, the first time each hop was
// recorded (a run delivered twice keeps its first delivery's hops).
func Read(dir string) (map[uuid.UUID]map[string]int64, error) {
	return ReadSince(dir, nil)
}

// ReadSince is Read, but for each id in since only the hops recorded at or
// after since[id] (Unix ns) count: a run woken from a sleep keeps the hops
// of the delivery that woke it, not of its first.
func ReadSince(dir string, since map[uuid.UUID]int64) (map[uuid.UUID]map[string]int64, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.hops"))
	if err != nil {
		return nil, err
	}
	out := map[uuid.UUID]map[string]int64{}
	for _, path := range files {
		if err := readFile(path, since, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readFile(path string, since map[uuid.UUID]int64, out map[uuid.UUID]map[string]int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var id, hop string
		var ns int64
		if _, err := fmt.Sscan(sc.Text(), &id, &hop, &ns); err != nil {
			return fmt.Errorf("hops: %s: %q: %w", path, sc.Text(), err)
		}
		u, err := uuid.Parse(id)
		if err != nil {
			return fmt.Errorf("hops: %s: %w", path, err)
		}
		if from, ok := since[u]; ok && ns < from {
			continue
		}
		m := out[u]
		if m == nil {
			m = map[string]int64{}
			out[u] = m
		}
		if old, ok := m[hop]; !ok || ns < old {
			m[hop] = ns
		}
	}
	return sc.Err()
}
