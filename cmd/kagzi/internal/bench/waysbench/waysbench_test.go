package waysbench

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/kagzi/kagzi/pkg/store"
)

// Fast tests of the scenarios' options, pacing and figures; the scenarios
// themselves run with `kagzi bench` (docs/BENCHMARKS.md).

func TestOptionsCheck(t *testing.T) {
	o := Options{}
	if err := o.Check("triggers"); err != nil || o.N != DefaultEvents {
		t.Fatalf("triggers defaults: %+v %v", o, err)
	}
	o = Options{}
	if err := o.Check("webhooks"); err != nil || o.N != DefaultDeliveries {
		t.Fatalf("webhooks defaults: %+v %v", o, err)
	}
	for _, c := range []struct {
		scenario string
		o        Options
	}{{"triggers", Options{N: MaxEvents + 1}}, {"webhooks", Options{N: MaxDeliveries + 1}}, {"webhooks", Options{Rate: -1}}, {"triggers", Options{Rate: MaxRate + 1}}} {
		if err := c.o.Check(c.scenario); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%s %+v: %v, want an invalid argument", c.scenario, c.o, err)
		}
	}
	if o := (Options{N: MaxEvents, Rate: MaxRate}); o.Check("triggers") != nil {
		t.Error("the maxima themselves are refused")
	}
}

func TestPaceCallsEachOnce(t *testing.T) {
	for _, rate := range []float64{0, 5000} {
		var mu sync.Mutex
		seen := map[int]int{}
		pace(context.Background(), 200, rate, func(i int) {
			mu.Lock()
			seen[i]++
			mu.Unlock()
		})
		if len(seen) != 200 {
			t.Fatalf("rate %v: %d distinct calls, want 200", rate, len(seen))
		}
		for i, n := range seen {
			if n != 1 || i < 0 || i >= 200 {
				t.Fatalf("rate %v: f(%d) called %d times", rate, i, n)
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	pace(ctx, 1000, 1, func(int) { calls++ })
	if calls > senders {
		t.Fatalf("a cancelled pace made %d calls", calls)
	}
}

func TestRows(t *testing.T) {
	for _, c := range []struct {
		d    Detail
		want string
	}{
		{&TriggersResult{Scenario: "triggers", Events: 2000, Triggers: 3, LatencyP99ms: 12.5, ExactlyThree: 2000, DistinctRuns: 6000, Met: true}, "2000 of 2000"},
		{&TriggersResult{Scenario: "triggers", Events: 10, Triggers: 3, Rate: 0}, "MISSED"},
		{&WebhooksResult{Scenario: "webhooks", Deliveries: 10000, Rate: 200, PerMin: 11990.5, P99ms: 7.25, Met: true}, "11990 per minute"},
	} {
		var b strings.Builder
		for _, r := range c.d.Rows() {
			b.WriteString(r[0] + "  " + r[1] + "\n")
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("rows of %T do not contain %q:\n%s", c.d, c.want, b.String())
		}
		j, err := json.Marshal(c.d)
		if err != nil || !strings.Contains(string(j), `"scenario"`) || !strings.Contains(string(j), `"met"`) {
			t.Errorf("json of %T: %s %v", c.d, j, err)
		}
	}
}

func TestContainsLine(t *testing.T) {
	body := "ok\npostgres: ok\nrelay: leader\n"
	if !containsLine(body, "relay: leader") || containsLine(body, "reaper: leader") || containsLine("relay: leadership", "relay: leader") {
		t.Error("containsLine")
	}
}
