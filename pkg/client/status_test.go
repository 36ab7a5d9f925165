package client_test

import (
	"testing"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// The client's statuses are the engine's (run statuses are one type,
// kagzitype's; worker statuses are converted by value): a value that
// drifts would turn every comparison a caller makes into a silent false.
func TestStatusesMatchTheEngine(t *testing.T) {
	runs := map[client.RunStatus]store.RunStatus{
		client.StatusPending: store.StatusPending, client.StatusRunning: store.StatusRunning,
		client.StatusSleeping: store.StatusSleeping, client.StatusCompleted: store.StatusCompleted,
		client.StatusFailed: store.StatusFailed, client.StatusCancelled: store.StatusCancelled,
		client.StatusScheduled: store.StatusScheduled, client.StatusPaused: store.StatusPaused,
	}
	for c, s := range runs {
		if string(c) != string(s) || !c.Valid() || c.Terminal() != s.Terminal() {
			t.Errorf("client %q (valid %v, terminal %v) vs store %q (terminal %v)", c, c.Valid(), c.Terminal(), s, s.Terminal())
		}
	}
	if client.RunStatus("DONE").Valid() {
		t.Error("an unknown status is valid")
	}
	workers := map[client.WorkerStatus]store.WorkerStatus{
		client.WorkerOnline: store.WorkerOnline, client.WorkerDraining: store.WorkerDraining, client.WorkerOffline: store.WorkerOffline,
	}
	for c, s := range workers {
		if string(c) != string(s) {
			t.Errorf("client %q vs store %q", c, s)
		}
	}
}
