package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/services/dispatcher"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// startOrderBound is how soon a run must start once a dispatcher is up
// beside a worker that started first: well under the work request's
// renewal time (KAGZI_WAIT_TIMEOUT, 30 s), which is what the run waited
// for before the worker asked again on hearing its first dispatcher.
const startOrderBound = 10 * time.Second

// A worker that starts before every dispatcher (compose starts workers as
// soon as NATS is up; a whole cluster restarts) sends its first work
// request to no dispatcher, and NATS does not answer "no responders":
// the reaper, like the test here, listens to work requests. When the
// first dispatcher comes up, the worker asks again at once, and a run
// started then runs within startOrderBound.
func TestWorkerStartedBeforeDispatchers(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url := testdb.New(t)
	ns := testnats.Start(t)
	st := openStore(t, url, nil)

	nc := ns.Connect(t)
	requests := make(chan *nats.Msg, 64)
	for _, s := range []string{protocol.SubjectWorkAll, protocol.SubjectDirectWorkAll} {
		if _, err := nc.ChanSubscribe(s, requests); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	env := []string{"KAGZI_NATS_URL=" + ns.URL(), "KAGZI_HTTP_ADDR=", "KAGZI_LOG_LEVEL=info",
		freezeProbeDirEnv + "=" + t.TempDir()}
	w := startChild(t, "worker", env, frozenWorkerService)
	select {
	case <-requests:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker sent no work request")
	}

	comps := dispatcher.Assemble(dispatcherConfig(t, url, nil),
		st, ns.Connect(t), nil).Components
	for i, c := range comps {
		if err := c.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(comps[i].Stop)
	}
	cl := newClient(t, st, ns.Connect(t))
	started := time.Now()
	h, err := cl.Start(ctx, "FreezeProbe", struct{}{}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitAll(t, []*client.Handle{h}, startOrderBound)
	t.Logf("the run completed %v after it started", time.Since(started).Round(time.Millisecond))
	if !w.logged("renewing work request") {
		t.Error("the worker did not ask again on hearing its first dispatcher")
	}
}
