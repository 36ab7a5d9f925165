package browsertest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/pkg/console/internal/consoletest"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
	"github.com/kagzi/kagzi/tests/devserver"
)

// register adds the workflows the pages show: Echo returns its input, Fail
// fails for good, Wait waits for the event "go".
func register(w *worker.Worker) error {
	if err := worker.Register(w, "Echo", func(ctx workflow.Context, in json.RawMessage) (json.RawMessage, error) {
		return workflow.Step(ctx, "echo", func(context.Context) (json.RawMessage, error) { return in, nil })
	}); err != nil {
		return err
	}
	if err := worker.Register(w, "Fail", func(ctx workflow.Context, in json.RawMessage) (int, error) {
		return workflow.Step(ctx, "boom", func(context.Context) (int, error) {
			return 0, workflow.NonRetryable(errors.New("order 42 failed"))
		})
	}); err != nil {
		return err
	}
	return worker.Register(w, "Wait", func(ctx workflow.Context, in json.RawMessage) (string, error) {
		v, err := workflow.WaitForEvent[string](ctx, "go", 0)
		return "got " + v, err
	})
}

// env is the engine and the console under test.
type env struct {
	t    *testing.T
	srv  *devserver.Server
	cl   *client.Client
	http *httptest.Server
	nc   *nats.Conn // the console's connection
}

// start runs the engine (dispatcher with relay, scheduler, reaper, one
// worker) on a database and NATS server of the test's own, and a console
// with opts in front of it.
func start(t *testing.T, opts console.Options) *env {
	t.Helper()
	c := consoletest.Start(t, opts, register, nil)
	return &env{t: t, srv: c.Srv, cl: c.Cl, http: c.HTTP, nc: c.NC}
}

// wait waits by push (client.Wait) until the run is finished.
func (e *env) wait(id uuid.UUID) *client.Run {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := e.cl.Wait(ctx, id)
	if err != nil {
		e.t.Fatalf("wait %s: %v", id, err)
	}
	return r
}
