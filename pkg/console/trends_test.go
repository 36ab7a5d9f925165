package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
)

// The queues page's last hour counts the runs that completed and failed in
// each queue and its depth (pending runs), and draws them, from the
// status moves the console follows
// for its counts: no statement of its own.
func TestQueuesTrendsCountWhatFinished(t *testing.T) {
	t.Parallel()
	e := start(t, console.Options{})
	type queues struct {
		Trends []struct {
			Queue     string  `json:"queue"`
			Completed []int64 `json:"completed_per_minute"`
			Failed    []int64 `json:"failed_per_minute"`
			Depth     []int64 `json:"depth"`
		} `json:"trends"`
	}
	// The console watches the namespace from its first page.
	var before queues
	e.getJSON("/api/v1/queues?ns=default", &before)

	var ids []uuid.UUID
	for i := range 5 {
		typ := "Echo"
		if i%2 == 1 {
			typ = "Fail"
		}
		h, err := e.cl.Start(context.Background(), typ, map[string]int{"n": i}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.RunID)
	}
	for _, id := range ids {
		e.wait(id)
	}
	// Runs no worker serves stay PENDING: the queue's depth.
	for i := range 2 {
		if _, err := e.cl.Start(context.Background(), "Unserved", map[string]int{"n": i}, client.StartOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	sum := func(xs []int64) (n int64) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	// The console reads what finished a coalescing interval after it
	// hears of it: wait for the counts, not for a time.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got queues
		e.getJSON("/api/v1/queues?ns=default", &got)
		if len(got.Trends) == 1 && got.Trends[0].Queue == "default" {
			tr := got.Trends[0]
			if len(tr.Completed) != 60 || len(tr.Failed) != 60 || len(tr.Depth) != 60 {
				t.Fatalf("want 60 minutes of each series, got %d, %d, %d", len(tr.Completed), len(tr.Failed), len(tr.Depth))
			}
			c, f := sum(tr.Completed), sum(tr.Failed)
			if c > 3 || f > 2 {
				t.Fatalf("counted %d completed and %d failed, of 3 and 2", c, f)
			}
			// A minute's depth is the most PENDING runs seen in it: the
			// 2 that stay, and maybe some of the 5 seen before they ran.
			if d := tr.Depth[59]; d > 7 {
				t.Fatalf("depth %d in this minute, of at most 7 pending runs", d)
			}
			if c == 3 && f == 2 && tr.Depth[59] >= 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("trends never showed 3 completed and 2 failed runs and 2 pending: %+v", got.Trends)
		}
		time.Sleep(50 * time.Millisecond)
	}
	code, body := e.do(http.MethodGet, "/queues?ns=default", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /queues: %d", code)
	}
	page := string(body)
	for _, want := range []string{`data-trend="default"`, `class="trend trend-completed"`, `class="trend trend-failed"`, `<polyline fill="none" points="0.0,`} {
		if !strings.Contains(page, want) {
			t.Errorf("the queues page lacks %q", want)
		}
	}
}
