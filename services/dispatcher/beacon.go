package dispatcher

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// A worker keeps one work request parked in one dispatcher, the one it
// addressed (protocol.SubjectDirect; the queue group's choice before it
// heard any); if that dispatcher dies, nothing tells the worker,
// which would wait for its request's renewal time (30 s by default) while
// runs are due. So every dispatcher publishes a beacon every
// BeaconInterval, answers a starting worker's probe with one, and says it
// leaves when it stops. Workers renew their request when a dispatcher they
// heard falls silent or leaves (pkg/worker, liveness.go). A beacon also
// names the relay the dispatcher runs, if it relays: workers renew when
// the relay changes, since the dispatcher that relayed may have died.
//
// Order at start: work requests are taken first (the server has the
// subscriptions: Start flushes), then probes are answered and the first
// beacon goes out. A worker that started before any dispatcher sent its
// first request to no one — and NATS does not say so, since the reaper
// listens to work requests too — so when it first hears a dispatcher it
// sends that request again (pkg/worker, liveness.go), and the dispatcher
// it heard is ready to take it. A worker that probed before the
// dispatcher listened to probes had subscribed to beacons before it, and
// hears the first one. A request parked in the moment between the
// subscription and the first beacon is the one a worker cannot watch: it
// waits for its renewal time if the dispatcher dies in that moment.

// beacons is the dispatcher's beacon loop.
type beacons struct {
	id   uuid.UUID
	stop chan struct{}
	done chan struct{}
}

// announce answers probes from now on and publishes the first beacon.
func (d *Dispatcher) announce() error {
	sub, err := d.nc.Subscribe(protocol.SubjectDispatcherProbe, d.onProbe)
	if err != nil {
		return fmt.Errorf("dispatcher: subscribe %s: %w", protocol.SubjectDispatcherProbe, err)
	}
	d.watchDrops(protocol.SubjectDispatcherProbe, sub)
	d.subs = append(d.subs, sub)
	d.beacon("", false, false)
	return nil
}

func (d *Dispatcher) onProbe(m *nats.Msg) {
	var p protocol.DispatcherProbe
	if err := protocol.Decode(m.Data, &p); err != nil {
		d.dropMalformed(m, err)
		return
	}
	if m.Reply == "" {
		d.dropMalformed(m, errors.New("probe without a reply subject"))
		return
	}
	d.beacon(m.Reply, false, false)
}

// startBeacons publishes a beacon every interval until stopBeacons.
func (d *Dispatcher) startBeacons() {
	b := &d.beacons
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.done)
		t := time.NewTicker(d.cfg.BeaconInterval)
		defer t.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-t.C:
				d.beacon("", false, false)
			}
		}
	}()
}

// stopBeacons ends the beacon loop, so no beacon follows the last one.
func (d *Dispatcher) stopBeacons() {
	if b := &d.beacons; b.stop != nil {
		close(b.stop)
		<-b.done
		b.stop = nil
	}
}

// leave tells the workers that the requests parked here are gone. It is
// sent after the work subscription's UNSUB on the same connection, so the
// server routes no renewed request back here.
func (d *Dispatcher) leave() {
	d.beacon("", true, false)
	_ = d.nc.FlushTimeout(time.Second)
}

// beacon publishes the dispatcher's beacon, to a probe's reply subject if
// one is given; leaving and renew set its flags. Every beacon says, in
// protocol.HeaderDirect, that the dispatcher takes what is addressed to it
// (onDirect), and in protocol.HeaderLease how long its claims hold: the
// reaper checks its own KAGZI_LEASE against it (config.Lease.Check).
func (d *Dispatcher) beacon(reply string, leaving, renew bool) {
	b := protocol.DispatcherBeacon{DispatcherID: d.beacons.id, IntervalMS: d.cfg.BeaconInterval.Milliseconds(),
		Leaving: leaving, Renew: renew}
	if d.deps.RelayID != nil && !leaving {
		b.RelayID = d.deps.RelayID()
	}
	data, err := protocol.Encode(&b)
	if err == nil {
		subject := protocol.SubjectDispatcherBeacon
		if reply != "" {
			subject = reply
		}
		// The header tells workers this dispatcher reads binary work
		// requests and reports (protocol.HeaderEncodings).
		err = d.nc.PublishMsg(&nats.Msg{Subject: subject, Data: data,
			Header: nats.Header{protocol.HeaderEncodings: []string{protocol.EncodingsBinary}, protocol.HeaderDirect: []string{"1"},
				protocol.HeaderLease: []string{protocol.FormatLease(d.cfg.Lease.Duration)}}})
	}
	if err != nil && d.ctx.Err() == nil {
		d.log.Warn("beacon not sent", "leaving", leaving, "err", err)
	}
}
