package reaper

// NATS drops messages a subscription has not read once its pending limit
// is reached (a slow consumer). A dropped heartbeat is a missed one, not
// an absent one: like a reconnect, a drop of liveness messages grants
// every worker one timeout to be heard again before it is presumed dead
// (a dropped registration is made up for by the next heartbeat, which the
// leader checks against the worker's row). A dropped wakeup, work request
// or relay announcement may have been news of a lease or a deadline: the
// leader reads both again.

func (r *Reaper) livenessDropped() {
	r.log.Warn("NATS dropped liveness messages: every worker gets one timeout to be heard")
	r.mu.Lock()
	r.amnesty = r.cfg.Clock.Now()
	r.mu.Unlock()
	r.wakeLeader()
}

func (r *Reaper) wakeupsDropped() {
	r.log.Warn("NATS dropped wakeups: reading leases and deadlines again")
	r.mu.Lock()
	r.resync = true
	r.mu.Unlock()
	r.wakeLeader()
}
