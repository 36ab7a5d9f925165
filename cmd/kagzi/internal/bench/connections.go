package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/bench/measure"
)

// ConnectionsResult is the figures of the connections scenario: the
// Postgres connections the services hold with 1 and with 50 worker
// processes. Workers have no database connection, so they must be equal.
type ConnectionsResult struct {
	Scenario    string `json:"scenario"`
	Runs        int    `json:"runs"`
	Dispatchers int    `json:"dispatchers"`
	// Connections1Worker and Connections50Workers are the most connections
	// to the bench database seen (every 50 ms) during a workload of Runs
	// runs and the second after it, the bench's own left out.
	Connections1Worker   int `json:"connections_1_worker"`
	Connections50Workers int `json:"connections_50_workers"`
	// ByService1 and ByService50 split them by application_name.
	ByService1  map[string]int `json:"by_service_1_worker"`
	ByService50 map[string]int `json:"by_service_50_workers"`
	Met         bool           `json:"met"`
}

// Rows implements Detail.
func (r *ConnectionsResult) Rows() [][2]string {
	return [][2]string{
		{"scenario", r.Scenario},
		{"workload", fmt.Sprintf("%d runs of Noop (1 step) at each count", r.Runs)},
		{"connections, 1 worker", fmt.Sprintf("%d (%s)", r.Connections1Worker, fmtByService(r.ByService1))},
		{"connections, 50 workers", fmt.Sprintf("%d (%s)", r.Connections50Workers, fmtByService(r.ByService50))},
		{"target", "equal: " + verdict(r.Met)},
	}
}

func fmtByService(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// countConnections counts client connections by application name, the
// bench's own left out.
func countConnections(bs []measure.Backend) (int, map[string]int) {
	by := map[string]int{}
	n := 0
	for _, b := range bs {
		if b.ApplicationName == benchApp {
			continue
		}
		by[b.ApplicationName]++
		n++
	}
	return n, by
}

// peakConnections runs a workload while sampling the connections every
// 50 ms, and keeps sampling for a second after it; it returns the peak.
func (e *env) peakConnections(ctx context.Context, runs int) (int, map[string]int, error) {
	var (
		mu   sync.Mutex
		peak int
		by   map[string]int
	)
	sample := func() {
		bs, err := measure.Activity(ctx, e.x.admin, e.dbName)
		if err != nil {
			return
		}
		n, b := countConnections(bs)
		mu.Lock()
		if n > peak {
			peak, by = n, b
		}
		mu.Unlock()
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			sample()
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	_, _, err := e.round(ctx, runs, 1)
	if err == nil {
		err = sleepCtx(ctx, time.Second)
	}
	stop()
	wg.Wait()
	sample()
	mu.Lock()
	defer mu.Unlock()
	return peak, by, err
}

func (e *env) connections(ctx context.Context) (Detail, error) {
	if err := e.openAdmin(ctx); err != nil {
		return nil, err
	}
	r := &ConnectionsResult{Scenario: "connections", Runs: e.o.Runs, Dispatchers: e.o.Dispatchers}
	var err error
	if r.Connections1Worker, r.ByService1, err = e.peakConnections(ctx, e.o.Runs); err != nil {
		return nil, err
	}
	e.o.Log.Info("connections: 1 worker", "connections", r.Connections1Worker)
	if _, err := e.startWorkers(ctx, 50-len(e.x.workers)); err != nil {
		return nil, err
	}
	if r.Connections50Workers, r.ByService50, err = e.peakConnections(ctx, e.o.Runs); err != nil {
		return nil, err
	}
	r.Met = r.Connections1Worker == r.Connections50Workers
	return r, nil
}
