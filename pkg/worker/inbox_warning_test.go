package worker_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/tests/testnats"
)

// A worker warns that its connection lacks the worker inbox prefix only
// where that matters: on a server that enforces authorization. Without
// authorization every inbox works, and a warning would only alarm.
func TestInboxWarningOnlyUnderAuthorization(t *testing.T) {
	t.Parallel()
	var open syncBuffer
	if _, err := worker.New(worker.Config{Logger: slog.New(slog.NewTextHandler(&open, nil))}, testnats.Start(t).Connect(t)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(open.String(), "inbox prefix") {
		t.Errorf("a worker on a server without authorization warns:\n%s", open.String())
	}

	auth := testnats.StartAuth(t, testnats.AuthOptions{Namespaces: []string{"default"}})
	var locked syncBuffer
	// The observer's connection has a service's inbox prefix, not a
	// worker's: deliveries to this worker would be refused.
	if _, err := worker.New(worker.Config{Logger: slog.New(slog.NewTextHandler(&locked, nil))}, auth.Connect(t)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(locked.String(), "no worker inbox prefix") {
		t.Errorf("a worker without the worker inbox prefix on a server with authorization does not warn:\n%s", locked.String())
	}
	var ok syncBuffer
	if _, err := worker.New(worker.Config{Logger: slog.New(slog.NewTextHandler(&ok, nil))},
		auth.ConnectAs(t, nil, "worker", "default", worker.DefaultIdentity)); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ok.String(), "inbox prefix") {
		t.Errorf("a worker with its inbox prefix warns:\n%s", ok.String())
	}
}
