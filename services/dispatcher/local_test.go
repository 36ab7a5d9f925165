package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// The relay of the dispatcher's own process hands each wakeup over
// directly: a start is claimed from that, and the same wakeup arriving
// from NATS afterwards starts no second claim (the queue's empty memory
// survives it).
func TestLocalRelayWakesOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pool, url := testdb.Pool(t)
	srv := testnats.Start(t)
	e := &env{t: t, ctx: ctx, st: store.New(pool, store.Options{}), nc: srv.Connect(t)}
	shared := srv.Connect(t) // the dispatcher's and the relay's, as Assemble has it
	cfg := testConfig(t, func(c *Config) { c.DatabaseURL = url })
	e.d = New(cfg, Deps{}, e.st, shared, nil)
	if err := e.d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.d.Stop)
	up := make(chan *nats.Msg, 4)
	sub, err := e.nc.ChanSubscribe(protocol.SubjectRelayUp, up)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	r := NewRelay(cfg, RelayDeps{Local: e.d}, shared, nil)
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	select {
	case <-up:
	case <-time.After(15 * time.Second):
		t.Fatal("the relay did not come up")
	}
	_ = sub.Unsubscribe()

	w := e.worker(accept)
	w.request(2)
	e.waitFor("the first claim's empty answer remembered", func() bool { return e.remembersEmpty(ttype) })
	base := e.d.Stats()

	var ids []uuid.UUID
	for i := 0; i < 3; i++ {
		// Reads still in flight (the backlog read of the relay's
		// announcement, the last empty claim's next-due read) would see the
		// coming start and wake the queue a second time: a claim the
		// handover did not cause.
		e.waitFor("no read in flight", e.quiet)
		id := e.run(nil, `{}`)
		ids = append(ids, id)
		got := w.next()
		if d := runIDs(got.d); len(d) != 1 || d[0] != id {
			t.Fatalf("start %d: delivered %v, want [%s]", i, d, id)
		}
		// Every NATS copy arrived and was recognised.
		e.waitFor("the wakeup's NATS copy", func() bool {
			seen := e.d.Stats().WakeupsSeen
			e.d.mu.Lock()
			defer e.d.mu.Unlock()
			return seen >= base.WakeupsSeen+int64(i+1) && len(e.d.local) == 0
		})
		e.waitFor("the claim's empty answer remembered", func() bool { return e.remembersEmpty(ttype) })
		w.request(2)
		e.waitStats("the renewal answered from memory", func(s Stats) bool { return s.EmptySkips == base.EmptySkips+int64(i+1) })
	}
	if st := e.d.Stats(); st.Claims != base.Claims+3 {
		t.Fatalf("%d claims for 3 starts, want 3: a NATS copy of a wakeup handed over claimed again", st.Claims-base.Claims)
	}
}
