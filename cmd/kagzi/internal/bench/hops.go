package bench

import (
	"fmt"
	"os"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/hops"
)

// HopStat is one hop of the dispatch path over the runs that recorded
// both its ends (--hops): From → To, in milliseconds. A hop may be
// negative: Postgres sends the NOTIFY as it commits, before the client
// hears its commit.
type HopStat struct {
	From  string  `json:"from"`
	To    string  `json:"to"`
	Runs  int     `json:"runs"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
}

// hopRun is what the bench itself saw of one latency run.
type hopRun struct {
	id                          uuid.UUID
	started, committed, running int64
}

// hopsEnv returns the variable that turns the services' hop recording on
// in a new directory.
func (e *env) hopsEnv() ([]string, error) {
	if !e.o.Hops {
		return nil, nil
	}
	dir, err := os.MkdirTemp("", "kagzi-hops-")
	if err != nil {
		return nil, err
	}
	e.hopsDir = dir
	return []string{"KAGZI_HOPS_DIR=" + dir}, nil
}

// joinHops reads the services' hop files (written by processes that have
// stopped) and returns each hop's percentiles over runs.
// A run's hops count from its started mark on (a sleeper's wake, not its
// first delivery).
func joinHops(dir string, runs []hopRun) ([]HopStat, error) {
	since := make(map[uuid.UUID]int64, len(runs))
	for _, r := range runs {
		since[r.id] = r.started
	}
	marks, err := hops.ReadSince(dir, since)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	return hopStats(marks, runs), nil
}

// hopStats joins the services' marks with the bench's. A claim records
// the last wakeup its queue received, which belongs to another run when
// the claim was not that run's wakeup's (its NOTIFY came before the run
// was started): such runs count for no hop next to the wakeup's.
func hopStats(marks map[uuid.UUID]map[string]int64, runs []hopRun) []HopStat {
	deltas := make([][]float64, len(hops.Order)-1)
	var total []float64
	for _, r := range runs {
		m := map[string]int64{}
		for k, v := range marks[r.id] {
			m[k] = v
		}
		m[hops.Started], m[hops.Committed] = r.started, r.committed
		if r.running != 0 {
			m[hops.Running] = r.running
		}
		if n, ok := m[hops.Notified]; ok && n < r.started {
			delete(m, hops.Notified)
			delete(m, hops.Relayed)
			delete(m, hops.Woken)
		}
		for i := range deltas {
			a, okA := m[hops.Order[i]]
			b, okB := m[hops.Order[i+1]]
			if okA && okB {
				deltas[i] = append(deltas[i], float64(b-a)/1e6)
			}
		}
		if r.running != 0 {
			total = append(total, float64(r.running-r.committed)/1e6)
		}
	}
	var out []HopStat
	for i, d := range deltas {
		if len(d) == 0 {
			continue
		}
		out = append(out, HopStat{From: hops.Order[i], To: hops.Order[i+1], Runs: len(d), P50ms: pct(d, 50), P99ms: pct(d, 99)})
	}
	if len(total) > 0 {
		out = append(out, HopStat{From: hops.Committed, To: hops.Running, Runs: len(total), P50ms: pct(total, 50), P99ms: pct(total, 99)})
	}
	return out
}

// HopRows are the hop table's lines.
func HopRows(hs []HopStat) [][2]string {
	rows := make([][2]string, 0, len(hs))
	for _, h := range hs {
		rows = append(rows, [2]string{fmt.Sprintf("hop %s → %s", h.From, h.To),
			fmt.Sprintf("p50 %.3f ms, p99 %.3f ms (%d runs)", h.P50ms, h.P99ms, h.Runs)})
	}
	return rows
}
