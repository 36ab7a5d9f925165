package schedstore

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestPlanOverlap(t *testing.T) {
	t.Parallel()
	at := func(m int) time.Time { return time.Date(2030, 1, 1, 0, m, 0, 0, time.UTC) }
	fires := []time.Time{at(1), at(2), at(3)}
	held := at(0)
	for _, c := range []struct {
		name     string
		p        OverlapPolicy
		live     bool
		buffered *time.Time
		start    []time.Time
		buf      *time.Time
		stop     bool
		dropped  []time.Time
	}{
		{"allow-all live", OverlapAllowAll, true, nil, fires, nil, false, nil},
		{"skip idle", OverlapSkip, false, nil, fires[:1], nil, false, fires[1:]},
		{"skip live", OverlapSkip, true, nil, nil, nil, false, fires},
		{"buffer idle", OverlapBufferOne, false, nil, fires[:1], &fires[1], false, fires[2:]},
		{"buffer live", OverlapBufferOne, true, nil, nil, &fires[0], false, fires[1:]},
		{"buffer live held", OverlapBufferOne, true, &held, nil, &held, false, fires},
		{"buffer released", OverlapBufferOne, false, &held, []time.Time{held}, &fires[0], false, fires[1:]},
		{"buffer released alone", OverlapBufferOne, false, &held, []time.Time{held}, nil, false, nil},
		{"cancel live", OverlapCancelOther, true, nil, fires[2:], nil, true, fires[:2]},
		{"terminate idle", OverlapTerminateOther, false, nil, fires[2:], nil, false, fires[:2]},
		{"cancel nothing due", OverlapCancelOther, true, nil, nil, nil, false, nil},
	} {
		fs := fires
		if c.name == "buffer released alone" || c.name == "cancel nothing due" {
			fs = nil
		}
		pl := planOverlap(c.p, c.live, c.buffered, fs)
		if !slices.Equal(pl.start, c.start) || !slices.Equal(pl.dropped, c.dropped) || pl.stop != c.stop ||
			(pl.buffered == nil) != (c.buf == nil) || (pl.buffered != nil && !pl.buffered.Equal(*c.buf)) {
			t.Errorf("%s: got start %v buffered %v stop %v dropped %v", c.name, pl.start, pl.buffered, pl.stop, pl.dropped)
		}
	}
}

func TestJitterDelay(t *testing.T) {
	t.Parallel()
	id := uuid.MustParse("01900000-0000-7000-8000-000000000001")
	fire := time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC)
	if d := JitterDelay(id, fire, 0); d != 0 {
		t.Fatalf("no jitter: %v", d)
	}
	seen := map[time.Duration]bool{}
	for i := range 200 {
		f := fire.Add(time.Duration(i) * time.Minute)
		d := JitterDelay(id, f, 10*time.Second)
		if d < 0 || d >= 10*time.Second {
			t.Fatalf("delay %v outside [0, 10s)", d)
		}
		if d != JitterDelay(id, f, 10*time.Second) {
			t.Fatal("the same fire time got two delays")
		}
		seen[d.Truncate(time.Second)] = true
	}
	// Spread over the range, not a constant.
	if len(seen) < 8 {
		t.Fatalf("200 fire times fell in %d of 10 seconds", len(seen))
	}
}
