// Package natsutil holds the small NATS plumbing shared by Kagzi's
// components that do not own their connection.
package natsutil

import (
	"sync"

	"github.com/nats-io/nats.go"
)

var mu sync.Mutex

// OnReconnect adds fn to nc's reconnect callbacks, keeping those already
// set: several components share one connection in `kagzi dev`, and each
// must read its backlog after a reconnect (messages sent while the
// connection was down are gone).
func OnReconnect(nc *nats.Conn, fn func()) {
	mu.Lock()
	defer mu.Unlock()
	prev := nc.Opts.ReconnectedCB
	nc.SetReconnectHandler(func(c *nats.Conn) {
		if prev != nil {
			prev(c)
		}
		fn()
	})
}
