package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
)

// `kagzi token complete` completes a token a run minted (here minted by
// the store, as the dispatcher does for a worker) once; a second time, a
// forged token or a payload that is not JSON are refused.
func TestTokenComplete(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.store()
	ctx := context.Background()
	run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "q", Type: "T"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "q", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "T"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %+v %v", got, err)
	}
	l := store.Lease{Namespace: "default", RunID: run.ID, Token: got[0].LeaseToken}
	o, minted, err := st.WaitTokensMint(ctx, store.WaitTokensMintParams{Lease: l, StepID: protocol.WaitTokenStepID("approval", 1),
		ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil || o.Err != nil {
		t.Fatalf("mint: %v %v", err, o.Err)
	}

	c.fails(cliutil.ExitUsage, "token", "complete", minted.Token, "--payload", `{"ok":`)
	var v ops.TokenJSON
	c.okJSON(&v, "token", "complete", minted.Token, "--payload", `{"ok": true}`)
	if v.RunID != run.ID || v.Event != minted.Event || compact(v.Payload) != `{"ok":true}` || v.TokenID != protocol.WaitTokenID(run.ID, "token:approval") {
		t.Fatalf("completed: %+v", v)
	}
	_, errOut := c.fails(cliutil.ExitFailed, "token", "complete", minted.Token, "--payload", `{"ok": false}`)
	mustContain(t, "a used token", errOut, "already used")
	_, errOut = c.fails(cliutil.ExitFailed, "token", "complete", minted.Token[:20])
	mustContain(t, "a forged token", errOut, "not valid")
	evs, err := st.EventsList(ctx, "default", run.ID)
	if err != nil || len(evs) != 1 {
		t.Fatalf("events: %+v %v", evs, err)
	}
}
