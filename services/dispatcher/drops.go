package dispatcher

import (
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// NATS drops messages a subscription has not read once its pending limit
// is reached (a slow consumer). Nothing else would tell: a dropped wakeup
// would leave its queue marked empty, parking requests without a claim
// until the next wakeup. So every drop is answered like a lost connection:
//
//   - wakeups or relay announcements: the backlog is read again (Resync);
//   - work requests: every worker is asked to renew its request (a beacon
//     with Renew), since the dropped ones were never parked;
//   - reports: nothing, the worker repeats a report nobody answered;
//   - probes: nothing, the worker hears the next beacon.

// watchDrops makes the dispatcher answer drops of sub, its subscription to
// subject.
func (d *Dispatcher) watchDrops(subject string, sub *nats.Subscription) {
	fn := func() { d.log.Warn("NATS dropped messages", "subject", subject) }
	switch subject {
	case protocol.SubjectReadyAll, protocol.SubjectRelayUp:
		fn = func() {
			d.log.Warn("NATS dropped messages: reading the backlog", "subject", subject)
			if d.ctx.Err() == nil {
				d.Resync()
			}
		}
	case protocol.SubjectWorkAll, protocol.SubjectDirectTo(d.beacons.id):
		fn = func() {
			d.log.Warn("NATS dropped work requests: asking workers to renew theirs", "subject", subject)
			d.beacon("", false, true)
		}
	}
	d.drops.Add(sub, fn)
}
