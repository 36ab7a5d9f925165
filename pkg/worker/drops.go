package worker

import (
	"github.com/nats-io/nats.go"
)

// NATS drops messages a subscription has not read once its pending limit
// is reached (a slow consumer). The worker has no backlog of its own to
// read; what it does instead depends on what was lost:
//
//   - a delivery: the dispatcher that sent it releases its runs when the
//     ack does not come, but it consumed the worker's request, so the
//     worker renews it rather than wait for its wait timeout;
//   - a beacon or relay announcement (maybe a dispatcher leaving): the
//     worker renews its request, which costs nothing where it lands;
//   - a cancel notice: the worker cannot ask which of its runs were
//     cancelled (it has no database), but the engine says it again: a
//     termination voided the run's lease, so its next report gets
//     lease_lost and the worker abandons it then; a request to cancel comes
//     back with the reply to the run's next step record. Either way the
//     run learns it at its next report instead of within milliseconds;
//   - registration news (an acknowledgement, an ask, a reaper taking
//     over): the worker registers again unless it holds an
//     acknowledgement; a lost ask is asked again.

// watchDrops makes the worker answer drops of its subscriptions.
func (w *Worker) watchDrops(deliveries, cancels *nats.Subscription, live []*nats.Subscription, liveCh chan *nats.Msg,
	regs []*nats.Subscription, regCh chan *nats.Msg) {
	w.drops.Add(deliveries, func() { w.renewRequest("deliveries dropped") })
	w.drops.Add(cancels, func() {
		w.log.Warn("cancel notices dropped: a cancelled or terminated run learns it at its next report")
	})
	for _, sub := range live {
		w.drops.AddChan(sub, liveCh, func() { w.renewRequest("dispatcher news dropped", "subject", sub.Subject) })
	}
	for _, sub := range regs {
		w.drops.AddChan(sub, regCh, func() { w.registerAgain("registration news dropped", true) })
	}
}
