package console

import (
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/store"
)

// The queues page draws, per queue, the last hour's throughput (runs
// completed per minute), failures (runs failed per minute) and depth (the
// most PENDING runs in each minute). They come from what the hub already
// does: every status move it applies for the counts also moves a queue's
// minute (applyLocked), so the trends cost no statement and no timer; a
// minute in which nothing moved is read as none completed or failed and
// the depth unchanged. They begin when the console starts watching the
// namespace (the first page of it shown) and are kept for trendMinutes.

// trendMinutes is how many minutes a queue's trend keeps: the last hour.
const trendMinutes = 60

// trendMinute is one minute of a queue.
type trendMinute struct {
	minute            int64 // Unix minute; 0: unused
	completed, failed int64
	depth             int64 // the most PENDING runs in the minute
	end               int64 // the PENDING runs at its last move
}

// queueTrend is one queue's ring of minutes and its depth now.
type queueTrend struct {
	// name is the queue's: the live runs share it (internLocked).
	name    string
	depth   int64
	minutes [trendMinutes]trendMinute
}

// at returns the minute m of the ring, reset if it held an older minute;
// depth starts at the depth now.
func (q *queueTrend) at(m int64) *trendMinute {
	b := &q.minutes[m%trendMinutes]
	if b.minute != m {
		*b = trendMinute{minute: m, depth: q.depth, end: q.depth}
	}
	return b
}

// trendLocked moves queue's trend for a run that moved from status from
// ("" for a run new to the hub) to status to at now; h.mu is held.
func (st *nsState) trendLocked(queue string, from, to store.RunStatus, now time.Time) {
	if st.trends == nil {
		st.trends = map[string]*queueTrend{}
	}
	q := st.trends[queue]
	if q == nil {
		q = &queueTrend{name: queue}
		st.trends[queue] = q
	}
	// The minute first: it begins at the depth before this move.
	b := q.at(now.Unix() / 60)
	if from == store.StatusPending {
		q.depth--
	}
	if to == store.StatusPending {
		q.depth++
	}
	switch to {
	case store.StatusCompleted:
		b.completed++
	case store.StatusFailed:
		b.failed++
	}
	b.depth, b.end = max(b.depth, q.depth), q.depth
}

// depthsLocked sets every queue's depth now from a baseline's live runs;
// h.mu is held.
func (st *nsState) depthsLocked(live map[uuid.UUID]store.LiveRun, now time.Time) {
	depth := map[string]int64{}
	for _, r := range live {
		if r.Status == store.StatusPending {
			depth[r.Queue]++
		}
	}
	if st.trends == nil {
		st.trends = map[string]*queueTrend{}
	}
	for q := range depth {
		if st.trends[q] == nil {
			st.trends[q] = &queueTrend{name: q}
		}
	}
	m := now.Unix() / 60
	for name, q := range st.trends {
		q.depth = depth[name]
		b := q.at(m)
		b.depth, b.end = max(b.depth, q.depth), q.depth
	}
}

// TrendView is one queue's last hour, a value per minute, oldest first,
// and the same as SVG polyline points for the queues page.
type TrendView struct {
	Queue string `json:"queue"`
	// Since is when the console began to watch: minutes before it are
	// unknown, not zero.
	Since     time.Time `json:"since"`
	Minutes   []int64   `json:"-"`
	Completed []int64   `json:"completed_per_minute"`
	Failed    []int64   `json:"failed_per_minute"`
	Depth     []int64   `json:"depth"`
	// Points are the charts' polylines (x from 0 to trendWidth, y from
	// trendHeight down to 0 at each series' maximum).
	CompletedPoints string `json:"-"`
	FailedPoints    string `json:"-"`
	DepthPoints     string `json:"-"`
	// MaxCompleted, MaxFailed and MaxDepth label the charts' scales.
	MaxCompleted int64 `json:"-"`
	MaxFailed    int64 `json:"-"`
	MaxDepth     int64 `json:"-"`
}

// The charts' size in SVG user units.
const (
	trendWidth  = 240
	trendHeight = 40
)

// trendsLocked returns the namespace's trends, by queue name, as of now;
// h.mu is held.
func (st *nsState) trendsLocked(now time.Time) []TrendView {
	last := now.Unix() / 60
	names := make([]string, 0, len(st.trends))
	for name := range st.trends {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]TrendView, 0, len(names))
	for _, name := range names {
		q := st.trends[name]
		v := TrendView{Queue: name, Since: st.baselineAt}
		// A minute nothing moved in keeps the depth the one before ended
		// at; minutes before the first known one take its depth (the
		// depth now if none is known).
		depth := q.depth
		for m := last - trendMinutes + 1; m <= last; m++ {
			if b := q.minutes[m%trendMinutes]; b.minute == m {
				depth = b.depth
				break
			}
		}
		for m := last - trendMinutes + 1; m <= last; m++ {
			b := q.minutes[m%trendMinutes]
			if b.minute == m {
				depth = b.end
				v.Minutes = append(v.Minutes, m)
				v.Completed = append(v.Completed, b.completed)
				v.Failed = append(v.Failed, b.failed)
				v.Depth = append(v.Depth, b.depth)
				continue
			}
			v.Minutes = append(v.Minutes, m)
			v.Completed = append(v.Completed, 0)
			v.Failed = append(v.Failed, 0)
			v.Depth = append(v.Depth, depth)
		}
		v.CompletedPoints, v.MaxCompleted = polyline(v.Completed)
		v.FailedPoints, v.MaxFailed = polyline(v.Failed)
		v.DepthPoints, v.MaxDepth = polyline(v.Depth)
		out = append(out, v)
	}
	return out
}

// polyline scales values to a trendWidth × trendHeight chart and returns
// its points and the maximum (the top of the scale, at least 1).
func polyline(values []int64) (string, int64) {
	top := int64(1)
	for _, v := range values {
		top = max(top, v)
	}
	var b strings.Builder
	n := max(len(values)-1, 1)
	for i, v := range values {
		if i > 0 {
			b.WriteByte(' ')
		}
		x := float64(i) * trendWidth / float64(n)
		y := trendHeight - float64(v)*trendHeight/float64(top)
		b.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(y, 'f', 1, 64))
	}
	return b.String(), top
}

// internLocked returns queue as the one string the namespace's live runs
// of that queue share, so a million live runs do not hold a million
// copies of a few names; h.mu is held.
func (st *nsState) internLocked(queue string) string {
	if q := st.trends[queue]; q != nil {
		return q.name
	}
	return queue
}
