package cronbench

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

func TestCronStats(t *testing.T) {
	a, b := uuid.New(), uuid.New()
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(3 * time.Second)
	fire := func(id uuid.UUID, sec int, late float64) store.ScheduleFire {
		return store.ScheduleFire{ScheduleID: id, RunID: uuid.New(), FireAt: from.Add(time.Duration(sec) * time.Second), LateMS: late}
	}
	fires := []store.ScheduleFire{
		fire(a, 0, 1), fire(a, 1, 2), fire(a, 2, 3),
		fire(b, 0, 4), fire(b, 0, 5), // fired twice
		fire(b, 2, 100), // second 1 missed
	}
	r := cronStats(fires, []uuid.UUID{a, b}, from, to)
	if r.Expected != 6 || r.Fired != 6 || r.Duplicates != 1 || r.Missed != 1 {
		t.Fatalf("expected/fired/duplicates/missed = %d/%d/%d/%d", r.Expected, r.Fired, r.Duplicates, r.Missed)
	}
	if r.LateP50ms != 3 || r.LateP99ms != 100 || r.LateMaxMS != 100 {
		t.Fatalf("lateness p50/p99/max = %v/%v/%v", r.LateP50ms, r.LateP99ms, r.LateMaxMS)
	}
}
