package natsutil

import (
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/internal/config"
	"github.com/kagzi/kagzi/pkg/protocol"
)

// CheckLeases subscribes nc to the dispatchers' beacons and calls bad,
// once per dispatcher, with the error of config.Lease.Check for each one
// whose lease (protocol.HeaderLease) is shorter than lease: the reaper,
// which extends live workers' leases to its own KAGZI_LEASE, calls it at
// start, so a longer reaper lease is reported as soon as it hears a
// dispatcher (at once: a running dispatcher beacons every
// KAGZI_BEACON_INTERVAL). A beacon without the header (an older
// dispatcher) is not checked. The caller drains the subscription.
func CheckLeases(nc *nats.Conn, lease config.Lease, bad func(error)) (*nats.Subscription, error) {
	var mu sync.Mutex
	told := map[string]bool{}
	return nc.Subscribe(protocol.SubjectDispatcherBeacon, func(m *nats.Msg) {
		d, ok := protocol.ParseLease(m.Header.Get(protocol.HeaderLease))
		if !ok || d >= lease.Duration {
			return
		}
		var b protocol.DispatcherBeacon
		if protocol.Decode(m.Data, &b) != nil {
			return
		}
		id := b.DispatcherID.String()
		mu.Lock()
		first := !told[id]
		told[id] = true
		mu.Unlock()
		if first {
			bad(lease.Check(d, id))
		}
	})
}
