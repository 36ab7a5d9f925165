package dispatcher

import (
	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// publishClaimed publishes the runs a committed claim took.
func (d *Dispatcher) publishClaimed(ns string, runs []store.ClaimedRun) {
	ids := make([]uuid.UUID, len(runs))
	for i := range runs {
		ids[i] = runs[i].ID
	}
	d.publishChanged(ns, ids)
}

// publishChanged tells views (the console) which runs of a namespace a
// committed claim or report batch changed: one small NATS message per
// batch, no statement. Nothing in the engine waits for it, so a failed
// publish is only counted by NATS.
func (d *Dispatcher) publishChanged(ns string, ids []uuid.UUID) {
	for len(ids) > 0 {
		n := min(len(ids), protocol.MaxChangedRuns)
		if data, err := protocol.Encode(&protocol.RunsChanged{Namespace: ns, Runs: ids[:n]}); err == nil {
			_ = d.nc.Publish(protocol.SubjectChanged(ns), data)
		}
		ids = ids[n:]
	}
}

// publishReported publishes the runs a committed report batch changed.
func (d *Dispatcher) publishReported(batch []*reportJob) {
	byNS := map[string][]uuid.UUID{}
	for _, j := range batch {
		ids := byNS[j.report.Namespace]
		for i, it := range j.report.Items {
			if j.results[i].Code == protocol.ResultOK && (len(ids) == 0 || ids[len(ids)-1] != it.RunID) {
				ids = append(ids, it.RunID)
			}
		}
		byNS[j.report.Namespace] = ids
	}
	for ns, ids := range byNS {
		if len(ids) > 0 {
			d.publishChanged(ns, ids)
		}
	}
}
