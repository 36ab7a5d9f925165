package scheduler

import (
	"github.com/kagzi/kagzi/pkg/store"
)

// overlapOnly says the advance of r started nothing because of the
// schedule's overlap policy (as opposed to skipping missed times): it is
// logged as such and not counted as a skip.
func overlapOnly(r store.SchedulesFireDueManyResult) bool {
	return len(r.Runs) == 0 && (len(r.Dropped) > 0 || r.Buffered != nil)
}

// logOverlap logs what a schedule's overlap policy did in an advance, and
// counts the fire times it started nothing for.
func (s *Scheduler) logOverlap(sc store.Schedule, r store.SchedulesFireDueManyResult) {
	if len(r.Dropped) == 0 && r.Buffered == nil && len(r.Stopped) == 0 {
		return
	}
	s.dropped.Add(int64(len(r.Dropped)))
	s.log.Info("overlap policy applied", "schedule_id", sc.ID, "ns", sc.Namespace, "type", sc.Type,
		"overlap", sc.Overlap, "started", len(r.Runs), "dropped", r.Dropped, "buffered", r.Buffered, "stopped", r.Stopped)
}
