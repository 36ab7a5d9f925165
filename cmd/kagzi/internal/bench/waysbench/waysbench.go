// Package waysbench is kagzi bench's scenarios of the ways in from
// outside Go (docs/triggers.md, docs/webhooks.md), through the real
// service processes: triggers publishes many events, each matching three
// triggers, while the relay's leading dispatcher and the leading reaper
// (which fans the events out) are SIGKILLed, then checks that every event
// started its three runs once and that workers completed them all;
// webhooks sends signed GitHub deliveries to a console process's
// POST /webhooks/{source} at a fixed rate and checks that each was
// accepted once and stored as an event.
package waysbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// Defaults and maxima of the scenarios' options.
const (
	// DefaultEvents is the events the triggers scenario publishes (--runs).
	DefaultEvents = 2_000
	// MaxEvents bounds --runs of the triggers scenario.
	MaxEvents = 100_000
	// DefaultDeliveries is the deliveries the webhooks scenario sends
	// (--runs).
	DefaultDeliveries = 10_000
	// MaxDeliveries bounds --runs of the webhooks scenario.
	MaxDeliveries = 1_000_000
	// MaxRate bounds --rate (events or deliveries per second; 0: as fast
	// as the publishers or senders go).
	MaxRate = 10_000
	// TargetPerMin is the webhook deliveries per minute the target asks
	// for.
	TargetPerMin = 10_000
	// senders is how many requests or publishes are in flight at most.
	senders = 32
	// pollEvery is how often the bench reads the runs' progress, as an
	// operator would.
	pollEvery = 250 * time.Millisecond
)

// Options are the scenarios' settings.
type Options struct {
	// N is the events (triggers) or deliveries (webhooks).
	N int
	// Rate is how many per second are published or sent (0: as fast as
	// they go).
	Rate float64
}

// Check fills the defaults of scenario and checks the maxima.
func (o *Options) Check(scenario string) error {
	def, most := DefaultEvents, MaxEvents
	if scenario == "webhooks" {
		def, most = DefaultDeliveries, MaxDeliveries
	}
	if o.N <= 0 {
		o.N = def
	}
	if o.N > most {
		return fmt.Errorf("%w: --runs %d: the %s scenario takes at most %d", store.ErrInvalidArgument, o.N, scenario, most)
	}
	if o.Rate < 0 || o.Rate > MaxRate {
		return fmt.Errorf("%w: --rate %g: want 0 (as fast as it goes) to %d", store.ErrInvalidArgument, o.Rate, MaxRate)
	}
	return nil
}

// Counter counts the scenario's items as they are expected and done (the
// CLI's progress line).
type Counter interface {
	AddTotal(n int64)
	Add(n int64)
}

// Deps is what the bench gives the scenarios: its client and store on the
// bench database (namespace and queue "bench"), its log and progress
// counter, and its service processes.
type Deps struct {
	Client  *client.Client
	Store   *store.Store
	Log     *slog.Logger
	Counter Counter // nil: none
	// Exe is the kagzi binary; Env the environment of the bench's
	// services (database, NATS, namespace, queue); ServiceLog receives
	// their output.
	Exe        string
	Env        []string
	ServiceLog io.Writer
	// Spawn starts `kagzi serve service` with Env and extra (the bench
	// stops it at the end); Procs are the service's processes so far,
	// oldest first.
	Spawn func(ctx context.Context, service string, extra ...string) (*exec.Cmd, error)
	Procs func(service string) []*exec.Cmd
}

// Detail is a scenario's figures: table rows, and JSON of itself.
type Detail interface{ Rows() [][2]string }

// Run runs scenario ("triggers" or "webhooks").
func Run(ctx context.Context, scenario string, d Deps, o Options) (Detail, error) {
	if err := o.Check(scenario); err != nil {
		return nil, err
	}
	if scenario == "webhooks" {
		return webhooks(ctx, d, o)
	}
	return triggers(ctx, d, o)
}

// pace calls f(i) for i in [0, n) from senders goroutines, started at
// rate per second (0: as fast as they go), and returns when all returned
// or ctx ended.
func pace(ctx context.Context, n int, rate float64, f func(i int)) {
	next := make(chan int)
	done := make(chan struct{})
	for range senders {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range next {
				f(i)
			}
		}()
	}
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		if rate > 0 {
			if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
		}
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	for range senders {
		<-done
	}
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// get returns the body of GET url ("" and the error when it fails).
func get(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// waitFor polls GET url until its body contains want, for at most limit;
// it returns how long that took.
func waitFor(ctx context.Context, hc *http.Client, url, want string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		if b, _ := get(ctx, hc, url); strings.Contains(b, want) {
			return time.Since(start), nil
		}
		if time.Since(start) > limit {
			return 0, fmt.Errorf("bench: %s did not say %q within %v", url, want, limit)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// sleep sleeps for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

func itoa(n int) string { return strconv.Itoa(n) }
