package client

import (
	"context"
	"fmt"

	"github.com/kagzi/kagzi/pkg/store"
)

// Errors of CompleteWaitToken: each refuses the token and stores nothing.
var (
	// ErrWaitTokenForged: the token is malformed, unknown, or its
	// signature does not verify.
	ErrWaitTokenForged = store.ErrWaitTokenForged
	// ErrWaitTokenExpired: the token's signed expiry has passed.
	ErrWaitTokenExpired = store.ErrWaitTokenExpired
	// ErrWaitTokenUsed: the token completed its wait already (it is also
	// an ErrConflict).
	ErrWaitTokenUsed = store.ErrWaitTokenUsed
)

// CompleteWaitToken completes the wait for a token a workflow minted
// (workflow.NewWaitToken) with payload (encoded as JSON; nil is null, a
// json.RawMessage is taken as it is): in one transaction the token is
// checked, the payload stored as the event its run waits for
// (workflow.WaitForToken), waking the run, and the token marked used.
// The token names its namespace, whatever the client's. A forged token is
// ErrWaitTokenForged, an expired one ErrWaitTokenExpired, a used one
// ErrWaitTokenUsed; a token whose run finished is ErrConflict. This is
// what `kagzi token complete` and the console's POST /callbacks/{token}
// do.
func (c *Client) CompleteWaitToken(ctx context.Context, token string, payload any) (*SentEvent, error) {
	raw, err := encodeInput(payload)
	if err != nil {
		return nil, fmt.Errorf("complete wait token: %w", err)
	}
	done, err := c.st.WaitTokensComplete(ctx, token, raw)
	if err != nil {
		return nil, err
	}
	sent := sentEvent(done.Event)
	return &sent, nil
}
