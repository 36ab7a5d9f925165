package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
)

// waitSaying waits for run id to end, following it across continue-as-new,
// and says on standard error every interval what it is waiting for, so
// that a run nobody serves (a typo in its type) is not a silent wait.
func waitSaying(ctx context.Context, cmd *cobra.Command, a *cliutil.App, cl *client.Client, id uuid.UUID, every time.Duration) (*client.Run, error) {
	type result struct {
		run *client.Run
		err error
	}
	var (
		mu  sync.Mutex
		cur = id
	)
	done := make(chan result, 1)
	go func() {
		run, err := cl.Wait(ctx, id)
		// A run that continued as new goes on as its successor.
		for err == nil && run.ContinuedAs != nil {
			mu.Lock()
			cur = *run.ContinuedAs
			mu.Unlock()
			run, err = cl.Wait(ctx, *run.ContinuedAs)
		}
		done <- result{run, err}
	}()
	if every <= 0 {
		every = 10 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	began := time.Now()
	for {
		select {
		case r := <-done:
			return r.run, r.err
		case <-t.C:
			mu.Lock()
			at := cur
			mu.Unlock()
			fmt.Fprintf(cmd.ErrOrStderr(), "Waiting for run %s (%s so far): %s\n", at,
				cliutil.FmtDuration(time.Since(began).Round(time.Second)), waitingFor(ctx, a, at))
		}
	}
}

// waitingFor says what a run's end waits for: its status and, for a run
// not running, why it waits (store.RunsWaiting, as run show says it).
func waitingFor(ctx context.Context, a *cliutil.App, id uuid.UUID) string {
	st, err := a.Store(ctx)
	if err != nil {
		return fmt.Sprintf("cannot read it (%v)", err)
	}
	r, err := st.RunsGet(ctx, a.Namespace, id)
	if err != nil {
		return fmt.Sprintf("cannot read it (%v)", err)
	}
	switch r.Status {
	case store.StatusPending, store.StatusSleeping:
		wt, ok, err := st.RunsWaiting(ctx, a.Namespace, id)
		if err != nil {
			return fmt.Sprintf("%s; cannot read why it waits (%v)", r.Status, err)
		}
		if !ok { // it started or ended since
			return string(r.Status)
		}
		line := fmt.Sprintf("%s; %s", r.Status, wt.Detail)
		if wt.Until != nil {
			line += ", until " + cliutil.FmtTimeP(wt.Until)
		}
		return line
	case store.StatusRunning:
		if r.LockedBy != nil {
			return fmt.Sprintf("RUNNING on worker %s (attempt %d)", r.LockedBy, r.Attempts)
		}
		return fmt.Sprintf("RUNNING (attempt %d)", r.Attempts)
	default:
		return string(r.Status)
	}
}
