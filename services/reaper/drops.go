package reaper

// NATS drops messages a subscription has not read once its pending limit
// is reached (a slow consumer). A dropped liveness message is the liveness
// sweep's to make up for (liveness.dropped). A dropped wakeup, work
// request or relay announcement may have been news of a lease or a
// deadline: the leader reads both again.

func (r *Reaper) wakeupsDropped() {
	r.log.Warn("NATS dropped wakeups: reading leases and deadlines again")
	r.resyncLater()
}
