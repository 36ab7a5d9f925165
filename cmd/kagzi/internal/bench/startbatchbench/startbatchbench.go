// Package startbatchbench is kagzi bench's start-batches scenario
// (docs/batching.md): Items batched starts of one key at MaxSize, from
// Writers concurrent writers, must make exactly Items/MaxSize runs that
// hold every item once. It times the adds and checks the runs' inputs and
// every item's run.
package startbatchbench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
)

// Defaults of the scenario: the target, 1,000 items at MaxSize
// 100 make exactly 10 runs.
const (
	DefaultItems   = 1000
	DefaultMaxSize = 100
	// Writers start the items concurrently, so adds to the one key meet.
	Writers = 8
	// maxWait is long enough that only the size closes a batch here.
	maxWait = 10 * time.Minute
	// workflowType is served by no worker: the runs wait, to be read.
	workflowType = "BenchStartBatch"
)

// Result is the scenario's figures.
type Result struct {
	Scenario string `json:"scenario"`
	Items    int    `json:"items"`
	MaxSize  int    `json:"max_size"`
	Writers  int    `json:"writers"`
	// Runs is the runs the adds started, WantRuns Items/MaxSize.
	Runs, WantRuns int
	// InRuns counts the items in the runs' inputs, Distinct the distinct
	// ones, Missing the added items no run holds, Mismatched the items
	// whose run (BatchItemRun) is not the one whose input holds them.
	InRuns, Distinct, Missing, Mismatched int
	// AddSec is the adds' wall time; AddP50ms and AddP99ms one add's.
	AddSec             float64 `json:"add_sec"`
	AddP50ms, AddP99ms float64
	Met                bool
}

// Rows implements the bench's Detail.
func (r *Result) Rows() [][2]string {
	ok := "no"
	if r.Met {
		ok = "yes"
	}
	return [][2]string{
		{"scenario", r.Scenario},
		{"adds", fmt.Sprintf("%d items at max size %d from %d writers: %.2f s (%.0f items/s); one add p50 %.2f ms, p99 %.2f ms",
			r.Items, r.MaxSize, r.Writers, r.AddSec, float64(r.Items)/r.AddSec, r.AddP50ms, r.AddP99ms)},
		{"runs", fmt.Sprintf("%d (want %d); %d items in them, %d distinct, %d missing, %d in another run than their own", r.Runs, r.WantRuns,
			r.InRuns, r.Distinct, r.Missing, r.Mismatched)},
		{"exactly once", ok},
	}
}

// Options are the scenario's settings (zero: the defaults).
type Options struct {
	Items, MaxSize int
}

// Deps is what the bench gives the scenario.
type Deps struct {
	Client *client.Client
	Log    *slog.Logger
}

// Run adds the items and checks the runs.
func Run(ctx context.Context, d Deps, o Options) (*Result, error) {
	if o.Items <= 0 {
		o.Items = DefaultItems
	}
	if o.MaxSize <= 0 {
		o.MaxSize = DefaultMaxSize
	}
	key := uuid.NewString() // a key of this run of the bench alone
	r := &Result{Scenario: "start-batches", Items: o.Items, MaxSize: o.MaxSize, Writers: Writers, WantRuns: o.Items / o.MaxSize}
	var (
		mu    sync.Mutex
		items = map[int]uuid.UUID{} // item number -> item id
		runs  []uuid.UUID
		lat   []float64
		wg    sync.WaitGroup
		errs  = make(chan error, Writers)
		next  = make(chan int)
	)
	batch := &client.Batching{Key: key, MaxSize: o.MaxSize, MaxWait: maxWait}
	start := time.Now()
	for range Writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := time.Now()
				h, err := d.Client.Start(ctx, workflowType, i, client.StartOptions{Batch: batch})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				lat = append(lat, float64(time.Since(t).Microseconds())/1000)
				items[i] = h.Item.ID
				if h.Created {
					runs = append(runs, h.RunID)
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for i := range o.Items {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			return nil, fmt.Errorf("batched start: %w", err)
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("batched start: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.AddSec = time.Since(start).Seconds()
	sort.Float64s(lat)
	r.AddP50ms, r.AddP99ms = lat[len(lat)/2], lat[len(lat)*99/100]
	r.Runs = len(runs)
	holder := map[int]uuid.UUID{}
	for _, id := range runs {
		run, err := d.Client.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		var in []int
		if err := json.Unmarshal(run.Input, &in); err != nil {
			return nil, fmt.Errorf("run %s input: %w", id, err)
		}
		r.InRuns += len(in)
		for _, i := range in {
			holder[i] = id
		}
	}
	r.Distinct = len(holder)
	for i, item := range items {
		h, ok, err := d.Client.BatchItemRun(ctx, item)
		if err != nil {
			return nil, err
		}
		switch {
		case !ok || !hasKey(holder, i):
			r.Missing++
		case h.RunID != holder[i]:
			r.Mismatched++
		}
	}
	r.Met = r.Runs == r.WantRuns && r.InRuns == o.Items && r.Distinct == o.Items && r.Missing == 0 && r.Mismatched == 0 && len(items) == o.Items
	d.Log.Info("start batches checked", "runs", r.Runs, "items", r.Distinct, "met", r.Met)
	return r, nil
}

func hasKey(m map[int]uuid.UUID, k int) bool {
	_, ok := m[k]
	return ok
}
