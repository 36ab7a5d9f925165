package protocol

import (
	"strconv"
	"time"

	"github.com/google/uuid"
)

// ReportWaitTokenMint is a workflow.NewWaitToken: the FUNCTION step StepID
// (WaitTokenStepID, attempt 1) mints a wait token of the run that expires
// at Until. Workers hold no key, so the dispatcher's store signs it; the
// step's output, returned as the result's Output, is a WaitTokenMinted.
// A repeated item finds the token minted first (same token, same expiry).
// An expiry past MaxWaitTokenTTL from the engine's clock (plus
// WaitTokenClockSkew) is refused as invalid.
const ReportWaitTokenMint ReportKind = "wait_token_mint"

// WaitTokenPrefix begins the step ids of wait_token_mint items.
const WaitTokenPrefix = "token:"

// WaitTokenEventPrefix begins the event names that completing a wait
// token sends to its run: WaitTokenEventPrefix + the token's id.
const WaitTokenEventPrefix = "token:"

// MaxWaitTokenTTL bounds how far ahead a wait token may expire.
const MaxWaitTokenTTL = 365 * 24 * time.Hour

// WaitTokenClockSkew is the slack the engine grants a worker's clock when
// it checks a token's expiry against MaxWaitTokenTTL.
const WaitTokenClockSkew = time.Hour

// WaitTokenStepID is the step id of the n-th (from 1) NewWaitToken named
// name in a run: "token:<name>" for the first, "token:<name>#<n>" after.
func WaitTokenStepID(name string, n int) string {
	if n <= 1 {
		return WaitTokenPrefix + name
	}
	return WaitTokenPrefix + name + "#" + strconv.Itoa(n)
}

// WaitTokenID is the id of the token that step stepID of run mints:
// derived (UUID v5), so that a repeated mint names the same token.
func WaitTokenID(run uuid.UUID, stepID string) uuid.UUID {
	return uuid.NewSHA1(run, []byte("wait-token:"+stepID))
}

// WaitTokenEvent is the event name that completing token id sends.
func WaitTokenEvent(id uuid.UUID) string { return WaitTokenEventPrefix + id.String() }

// WaitTokenMinted is the output of a wait_token_mint step: the token (the
// credential that completes the wait), the event its completion sends to
// the run, and when it expires.
type WaitTokenMinted struct {
	Token     string    `json:"token"`
	Event     string    `json:"event"`
	ExpiresAt time.Time `json:"expires_at"`
}
