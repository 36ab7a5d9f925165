package protocol

import (
	"strconv"
	"time"

	"github.com/google/uuid"
)

// DefaultBeaconInterval is how often a dispatcher publishes its beacon
// unless configured otherwise.
const DefaultBeaconInterval = time.Second

// MaxBeaconInterval bounds DispatcherBeacon.IntervalMS.
const MaxBeaconInterval = time.Minute

// BeaconSilence is how long a dispatcher that beacons every interval may
// stay silent before a worker that heard it treats it as gone: three
// intervals, so two beacons are missing and the third is late. A worker
// that is wrong about it only renews its request early.
func BeaconSilence(interval time.Duration) time.Duration { return 3 * interval }

// DispatcherBeacon says a dispatcher is alive, and so may hold parked work
// requests. A dispatcher publishes one when it starts (before it takes
// any request), every IntervalMS after that, and in answer to a
// DispatcherProbe; a worker renews its outstanding request when a
// dispatcher it heard falls silent (see BeaconSilence), leaves or asks for
// renewals, since its request may have been parked there.
type DispatcherBeacon struct {
	Versioned
	DispatcherID uuid.UUID `json:"dispatcher_id"`
	// IntervalMS is the time between this dispatcher's beacons.
	IntervalMS int64 `json:"interval_ms"`
	// Leaving: the dispatcher stopped taking work requests and dropped
	// those it held (a graceful stop); no beacon of it follows.
	Leaving bool `json:"leaving,omitempty"`
	// Renew: the dispatcher may have lost work requests (NATS dropped some
	// before it read them, or its connection was down or on a server that
	// had stopped answering); every worker renews its own.
	Renew bool `json:"renew,omitempty"`
	// RelayID is the id of the relay the dispatcher runs (RelayUp.RelayID)
	// while that relay relays. A worker that sees the relay change renews
	// its request: relays move when the dispatcher that ran one dies.
	RelayID string `json:"relay_id,omitempty"`
}

// HeaderDirect, set to "1" on a DispatcherBeacon, says its dispatcher takes
// work requests, reports and payload requests addressed to it
// (SubjectDirect) besides those of its queue group. A worker addresses only
// dispatchers that say so; an older one does not, and gets the queue
// group's. It is a header, not a field, because a reader rejects a message
// with fields it does not know, and older workers read these beacons.
const HeaderDirect = "Kagzi-Direct"

// HeaderLease on a DispatcherBeacon is the dispatcher's lease
// (KAGZI_LEASE) in milliseconds (FormatLease): how long its claims hold
// without heartbeats. The reaper, which extends a live worker's leases by
// its own lease, checks it is no longer (a longer one would hold the runs
// of a worker that died past the dispatchers' lease). A header for the
// reason HeaderDirect is one.
const HeaderLease = "Kagzi-Lease"

// FormatLease is HeaderLease's value for lease.
func FormatLease(lease time.Duration) string { return strconv.FormatInt(lease.Milliseconds(), 10) }

// ParseLease reads HeaderLease's value; ok is false when v is not one (a
// beacon of a dispatcher that does not announce its lease has none).
func ParseLease(v string) (lease time.Duration, ok bool) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// Interval is the time between the dispatcher's beacons.
func (m *DispatcherBeacon) Interval() time.Duration {
	return time.Duration(m.IntervalMS) * time.Millisecond
}

// Validate implements Message.
func (m *DispatcherBeacon) Validate() error {
	if err := checkID(m, "dispatcher id", m.DispatcherID); err != nil {
		return err
	}
	if m.IntervalMS < 1 || m.IntervalMS > MaxBeaconInterval.Milliseconds() {
		return invalid(m, "interval %d ms must be 1 to %d", m.IntervalMS, MaxBeaconInterval.Milliseconds())
	}
	if len(m.RelayID) > 200 {
		return invalid(m, "relay id is %d bytes, at most 200", len(m.RelayID))
	}
	return nil
}

// DispatcherProbe asks every dispatcher to answer with its beacon, sent to
// the probe's reply subject. A worker sends one when it starts and after a
// reconnect, before its work request, so it knows every dispatcher its
// request may be parked in without waiting for their next beacons.
type DispatcherProbe struct {
	Versioned
	WorkerID uuid.UUID `json:"worker_id"`
}

// Validate implements Message.
func (m *DispatcherProbe) Validate() error {
	return checkID(m, "worker id", m.WorkerID)
}
