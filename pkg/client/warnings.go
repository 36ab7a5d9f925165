package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// servedFor is how long the client trusts what it last read of whether a
// type is served on a queue before it reads again: the warning is
// advice, and a start must not pay a query for it each time.
const servedFor = 5 * time.Second

// servedKey names what a live worker serves.
type servedKey struct{ queue, typ, version string }

// served remembers, per key, how many live workers served it when last
// read (store.WorkersServing).
type served struct {
	mu   sync.Mutex
	seen map[servedKey]servedSeen
}

type servedSeen struct {
	n  int
	at time.Time
}

// warnings are those of a start of p that was not refused: that no live
// worker serves its type on its queue, so it waits PENDING until one
// registers (RequireWorker refuses such a start instead). What cannot be
// read gives no warning: it is advice, not a check. st is the store of
// the start, so that StartTx reads in its caller's transaction rather
// than wait for a second connection of a pool it may hold the last of.
func (c *Client) warnings(ctx context.Context, st *store.Store, p store.RunsCreateParams) []string {
	if p.RequireWorker {
		return nil
	}
	k := servedKey{p.Queue, p.Type, p.Version}
	now := time.Now()
	c.served.mu.Lock()
	s, ok := c.served.seen[k]
	c.served.mu.Unlock()
	if !ok || now.Sub(s.at) > servedFor {
		n, err := st.WorkersServing(ctx, c.ns, p.Queue, p.Type, p.Version)
		if err != nil {
			return nil
		}
		s = servedSeen{n, now}
		c.served.mu.Lock()
		if c.served.seen == nil || len(c.served.seen) >= maxServedKeys {
			c.served.seen = map[servedKey]servedSeen{}
		}
		c.served.seen[k] = s
		c.served.mu.Unlock()
	}
	if s.n > 0 {
		return nil
	}
	tv := protocol.Echo(p.Type)
	if p.Version != "" {
		tv += "@" + protocol.Echo(p.Version)
	}
	return []string{fmt.Sprintf("no live worker serves %s on queue %s: the run waits until one registers (StartOptions.RequireWorker refuses such a start)",
		tv, protocol.Echo(p.Queue))}
}

// maxServedKeys bounds what served remembers: a client starting many
// distinct types forgets them all and reads again.
const maxServedKeys = 1024
