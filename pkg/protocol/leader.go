package protocol

import (
	"time"

	"github.com/google/uuid"
)

// Leader roles: the work one replica at a time does, each elected with a
// Postgres advisory lock and watched through its leader's beacons.
const (
	// LeaderRelay is the dispatcher replica that relays Postgres
	// notifications to NATS.
	LeaderRelay = "relay"
	// LeaderReaper is the reaper replica that acts on liveness, leases
	// and deadlines.
	LeaderReaper = "reaper"
)

// SubjectLeaderBeacon returns the subject of role's LeaderBeacon (role is
// LeaderRelay or LeaderReaper).
func SubjectLeaderBeacon(role string) string { return Prefix + "leader." + role }

// LeaderBeacon says the leader of a role is making progress. The leader
// publishes one when it is elected and every IntervalMS after that; a
// standby that hears none for BeaconSilence(interval) ends the silent
// leader's database session, which releases the lock to it. A process
// that is frozen keeps its sessions (its kernel still answers), so the
// lock alone would keep a frozen leader in charge for as long as it is
// frozen.
type LeaderBeacon struct {
	Versioned
	Role string `json:"role"`
	// LeaderID is the replica's id, fresh for each process.
	LeaderID uuid.UUID `json:"leader_id"`
	// IntervalMS is the time between this leader's beacons.
	IntervalMS int64 `json:"interval_ms"`
}

// Interval is the time between the leader's beacons.
func (m *LeaderBeacon) Interval() time.Duration {
	return time.Duration(m.IntervalMS) * time.Millisecond
}

// Validate implements Message.
func (m *LeaderBeacon) Validate() error {
	if m.Role != LeaderRelay && m.Role != LeaderReaper {
		return invalid(m, "role %q: want %q or %q", m.Role, LeaderRelay, LeaderReaper)
	}
	if err := checkID(m, "leader id", m.LeaderID); err != nil {
		return err
	}
	if m.IntervalMS < 1 || m.IntervalMS > MaxBeaconInterval.Milliseconds() {
		return invalid(m, "interval %d ms must be 1 to %d", m.IntervalMS, MaxBeaconInterval.Milliseconds())
	}
	return nil
}
