package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// ErrWaitTokenTTL is wrapped by the (non-retryable) error of a
// NewWaitToken whose time to live is not positive or beyond
// protocol.MaxWaitTokenTTL (365 days).
var ErrWaitTokenTTL = errors.New("workflow: wait token time to live out of range")

// WaitToken is a token a workflow minted with NewWaitToken: whoever holds
// its text completes the run's wait for it, once, with a JSON payload
// (client.CompleteWaitToken, `kagzi token complete`, or
// POST /callbacks/{token} on the web console). The engine signs it with a
// key workers never see; a forged, expired or used token is refused.
type WaitToken struct {
	minted protocol.WaitTokenMinted
}

// Token is the token's text (unpadded base64url, URL-safe as it is): the
// credential to hand to whoever completes the wait.
func (t WaitToken) Token() string { return t.minted.Token }

// ExpiresAt is when the token expires (signed into it, in whole seconds:
// the time asked for, rounded up).
func (t WaitToken) ExpiresAt() time.Time { return t.minted.ExpiresAt }

// Event is the event name the token's completion sends to the run.
func (t WaitToken) Event() string { return t.minted.Event }

// NewWaitToken mints a wait token of the run, valid for ttl (at most
// protocol.MaxWaitTokenTTL). It is a durable call: the n-th NewWaitToken
// named name in a run is the FUNCTION step
// protocol.WaitTokenStepID(name, n), whose output is the token, so a
// replay returns the same token (NewWaitTokens must come in the same order
// on every execution, like steps). The name must be a valid event name;
// the workflow waits for the token with WaitForToken. The token is
// recorded in the run's history (the step's output): whoever reads the
// history can complete the wait.
func NewWaitToken(ctx Context, name string, ttl time.Duration) (WaitToken, error) {
	if err := protocol.ValidEventName(name); err != nil {
		return WaitToken{}, NonRetryable(fmt.Errorf("workflow: wait token: %w", err))
	}
	if ttl <= 0 || ttl > protocol.MaxWaitTokenTTL {
		return WaitToken{}, NonRetryable(fmt.Errorf("%w: %s, want more than 0 and at most %s",
			ErrWaitTokenTTL, ttl, protocol.MaxWaitTokenTTL))
	}
	ex := ctx.execution()
	id := protocol.WaitTokenStepID(name, ex.nth(protocol.WaitTokenPrefix+name))
	prev, err := ex.enter(ctx, id)
	if err != nil {
		return WaitToken{}, err
	}
	switch {
	case prev != nil && prev.Status == stepCompleted:
		return decodeWaitToken(ex, id, ex.output(prev))
	case prev != nil:
		return WaitToken{}, ex.replayError("step %q is recorded %s, not as a minted wait token", id, prev.Status)
	}
	if err := cancelled(ctx); err != nil {
		return WaitToken{}, err
	}
	now := ex.now()
	until := now.Add(ttl).UTC()
	it := ex.item(protocol.ReportWaitTokenMint)
	it.StepID = id
	it.Attempt = 1
	it.Until = &until
	it.StartedAt = &now
	res := ex.report(it)[0]
	if len(res.Output) == 0 {
		return WaitToken{}, fmt.Errorf("workflow: wait token %q: not minted: %s", name, res.Message)
	}
	return decodeWaitToken(ex, id, res.Output)
}

func decodeWaitToken(ex *execution, id string, out json.RawMessage) (WaitToken, error) {
	var t WaitToken
	if err := json.Unmarshal(out, &t.minted); err != nil || t.minted.Token == "" || t.minted.Event == "" {
		return WaitToken{}, ex.replayError("step %q: its output is not a minted wait token", id)
	}
	return t, nil
}

// WaitForToken waits durably for tok's completion and returns its payload
// decoded into T. It is WaitForEvent for the token's event (tok.Event()),
// with its semantics: a completion that came before the wait is received
// at once, and the run is suspended until one comes or the timeout
// passes. Nothing can complete a token after its expiry, so a timeout of
// zero or less, or one past the expiry, waits until the expiry; when it
// passes, WaitForToken returns an error wrapping ErrEventTimeout.
func WaitForToken[T any](ctx Context, tok WaitToken, timeout time.Duration) (T, error) {
	var zero T
	if tok.minted.Event == "" {
		return zero, NonRetryable(errors.New("workflow: WaitForToken of a token NewWaitToken did not return"))
	}
	left := tok.minted.ExpiresAt.Sub(ctx.execution().now())
	if left <= 0 {
		// Already past its expiry: the wait times out at once (a tiny
		// timeout keeps it a recorded wait, replayed the same way).
		left = time.Millisecond
	}
	if timeout <= 0 || timeout > left {
		timeout = left
	}
	raw, _, err := waitEvent(ctx, tok.minted.Event, timeout)
	if err != nil {
		return zero, err
	}
	return decodeEvent[T](tok.minted.Event, raw)
}
