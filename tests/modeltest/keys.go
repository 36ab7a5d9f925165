package modeltest

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"time"
)

// KeyOf is the concurrency key of the run of the program key among n keys.
func KeyOf(key string, n int) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return "key-" + strconv.Itoa(int(h.Sum32()%uint32(n)))
}

// KeyPeaks returns, per concurrency key (KeyOf among n keys), the most
// executions of the top-level runs of that key that overlapped in time. A
// run's executions lie within the time it held its slot, so a peak above
// the key's limit means the limit was exceeded; one at or below it does
// not prove the slots never were (a slot is held a little longer than the
// execution in it). Continued runs and children take no key.
func KeyPeaks(execs []Execution, programs []Program, n int) map[string]int {
	top := map[string]bool{}
	for _, p := range programs {
		top[p.Key] = true
	}
	type edge struct {
		at    time.Time
		delta int
	}
	byKey := map[string][]edge{}
	for _, e := range execs {
		if !top[e.Key] {
			continue
		}
		k := KeyOf(e.Key, n)
		byKey[k] = append(byKey[k], edge{e.Begin, 1}, edge{e.End, -1})
	}
	peaks := map[string]int{}
	for k, es := range byKey {
		// An end at the same instant as a begin comes first.
		sort.Slice(es, func(i, j int) bool {
			if es[i].at.Equal(es[j].at) {
				return es[i].delta < es[j].delta
			}
			return es[i].at.Before(es[j].at)
		})
		cur := 0
		for _, e := range es {
			cur += e.delta
			peaks[k] = max(peaks[k], cur)
		}
	}
	return peaks
}

// ReusePolicy picks, for the i-th program of a seed, the id reuse policy of
// a second start with its run's external id once that run ended (one
// program in six; none for a chain of runs, whose later runs hold no id,
// nor for a program with a deadline, which most such programs sleep past: the
// second run would wait for it):
// "allow", "failed-only", "reject" or "terminate", as
// client.ParseIDReusePolicy reads them.
func ReusePolicy(p Program, seed uint64, i int) (string, bool) {
	if p.Continue != nil || p.DeadlineMS > 0 {
		return "", false
	}
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%d/%d", seed, i)
	v := h.Sum64()
	if v%6 != 0 {
		return "", false
	}
	return []string{"allow", "failed-only", "reject", "terminate"}[(v/6)%4], true
}

// ReuseStarts says whether a start under the id reuse policy, with the id
// of a run that ended with status (and no live run holding it), starts a
// new run: allow and terminate always do, failed-only after a run that did
// not complete, reject never.
func ReuseStarts(policy, status string) bool {
	switch policy {
	case "allow", "terminate":
		return true
	case "failed-only":
		return status != StatusCompleted
	}
	return false
}
