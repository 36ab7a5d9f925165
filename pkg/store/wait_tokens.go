package store

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Wait tokens (docs/callbacks.md). A token is the unpadded base64url
// encoding of 57 bytes:
//
//	version (1 byte, 1) | token id (16) | expiry (8, Unix seconds, big endian) | mac (32)
//
// where mac is HMAC-SHA256, under the namespace's key, of "kagzi wait
// token" followed by the first 25 bytes. The key (32 bytes from
// crypto/rand, made on the namespace's first mint) stays in Postgres and
// in this package: workers hold no key, the dispatcher mints for them
// (WaitTokensMint). The expiry is signed, so it cannot be extended.

// Errors of WaitTokensComplete, each refusing the token and storing
// nothing.
var (
	// ErrWaitTokenForged: the token is malformed, names no token, or its
	// signature does not verify (forged, damaged, or of another database).
	ErrWaitTokenForged = errors.New("wait token is not valid (forged or damaged)")
	// ErrWaitTokenExpired: the token's signed expiry has passed.
	ErrWaitTokenExpired = errors.New("wait token expired")
	// ErrWaitTokenUsed: the token completed its wait already (single
	// use). It is an ErrConflict.
	ErrWaitTokenUsed = fmt.Errorf("%w: wait token already used", ErrConflict)
)

const (
	waitTokenVersion = 1
	waitTokenSigned  = 1 + 16 + 8
	waitTokenBytes   = waitTokenSigned + sha256.Size
	waitTokenDomain  = "kagzi wait token"
)

// MaxWaitTokenLen bounds the length of a token's text; the edges refuse
// longer input before decoding it.
const MaxWaitTokenLen = 128

var (
	waitTokenKeysGetSQL = stmt("WaitTokenKeysGet")
	waitTokenKeysAddSQL = stmt("WaitTokenKeysAdd")
	waitTokensMintSQL   = stmt("WaitTokensMint")
	waitTokensGetSQL    = stmt("WaitTokensGet")
	waitTokensUseSQL    = stmt("WaitTokensUse")
)

// waitTokenKey returns the namespace's signing key, making it on first
// use. Two first uses at once both insert; the second's insert waits for
// the first and does nothing, and its next read (a new statement) sees
// the first's key.
func (s *Store) waitTokenKey(ctx context.Context, ns string) ([]byte, error) {
	var key []byte
	err := waitTokenKeysGetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns}).Scan(&key)
	if !isNoRows(err) {
		return key, mapErr("read wait token key", err)
	}
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("make wait token key: %w", err)
	}
	if _, err := waitTokenKeysAddSQL.Exec(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns, "key": fresh}); err != nil {
		return nil, mapErr("add wait token key", err)
	}
	err = waitTokenKeysGetSQL.QueryRow(ctx, s.h.DB, pgx.NamedArgs{"namespace": ns}).Scan(&key)
	return key, mapErr("read wait token key", err)
}

// waitTokenMAC signs a token's first waitTokenSigned bytes.
func waitTokenMAC(key, signed []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(waitTokenDomain))
	m.Write(signed)
	return m.Sum(nil)
}

// encodeWaitToken builds and signs the token of id expiring at exp.
func encodeWaitToken(key []byte, id uuid.UUID, exp time.Time) string {
	b := make([]byte, waitTokenBytes)
	b[0] = waitTokenVersion
	copy(b[1:17], id[:])
	binary.BigEndian.PutUint64(b[17:25], uint64(exp.Unix()))
	copy(b[waitTokenSigned:], waitTokenMAC(key, b[:waitTokenSigned]))
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeWaitToken splits a token into its id, expiry and the bytes to
// verify, or fails with ErrWaitTokenForged.
func decodeWaitToken(tok string) (id uuid.UUID, exp time.Time, b []byte, err error) {
	if len(tok) > MaxWaitTokenLen {
		return id, exp, nil, fmt.Errorf("%w: longer than %d characters", ErrWaitTokenForged, MaxWaitTokenLen)
	}
	b, err = base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(b) != waitTokenBytes || b[0] != waitTokenVersion {
		return id, exp, nil, fmt.Errorf("%w: not a Kagzi wait token", ErrWaitTokenForged)
	}
	copy(id[:], b[1:17])
	return id, time.Unix(int64(binary.BigEndian.Uint64(b[17:25])), 0).UTC(), b, nil
}

// WaitTokensMintParams are a workflow's NewWaitToken under the run's
// lease: the FUNCTION step StepID (attempt 1) mints a token expiring at
// ExpiresAt.
type WaitTokensMintParams struct {
	Lease     Lease
	StepID    string
	ExpiresAt time.Time
	StartedAt *time.Time
}

// WaitTokensMint mints a wait token for a run and records the step that
// did it, in the caller's transaction (the report's), and returns the
// token as the step's output records it. The token's id is derived from
// the run and the step (protocol.WaitTokenID), so a repeated report finds
// the token minted first, with its expiry, and records the same output.
// An expiry in the past or beyond protocol.MaxWaitTokenTTL (plus
// protocol.WaitTokenClockSkew) from now is ErrInvalidArgument. The
// outcome is the step record's (a lost lease, say).
func (s *Store) WaitTokensMint(ctx context.Context, p WaitTokensMintParams) (StepOutcome, protocol.WaitTokenMinted, error) {
	var minted protocol.WaitTokenMinted
	now := time.Now()
	// Whole seconds (the token's), rounded up: a token never expires
	// before the time asked for.
	exp := p.ExpiresAt.Truncate(time.Second).UTC()
	if exp.Before(p.ExpiresAt) {
		exp = exp.Add(time.Second)
	}
	if !exp.After(now) || exp.After(now.Add(protocol.MaxWaitTokenTTL+protocol.WaitTokenClockSkew)) {
		return StepOutcome{}, minted, invalidf("wait token expiry %s must be after now and at most %s ahead",
			exp.Format(time.RFC3339), protocol.MaxWaitTokenTTL)
	}
	key, err := s.waitTokenKey(ctx, p.Lease.Namespace)
	if err != nil {
		return StepOutcome{}, minted, err
	}
	id := protocol.WaitTokenID(p.Lease.RunID, p.StepID)
	minted.Event = protocol.WaitTokenEvent(id)
	rows, err := waitTokensMintSQL.Query(ctx, s.h.DB, leaseArgs(p.Lease, pgx.NamedArgs{"token_id": id, "step_id": p.StepID,
		"event_name": minted.Event, "expires_at": exp}))
	if err != nil {
		return StepOutcome{}, minted, mapErr("mint wait token", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return StepOutcome{}, minted, mapErr("mint wait token", err)
	}
	step := StepsRecordParams{Lease: p.Lease, StepID: p.StepID, Attempt: 1, Kind: StepFunction, Status: StepCompleted,
		StartedAt: p.StartedAt}
	if len(got) > 0 {
		minted.ExpiresAt = got[0].UTC()
		minted.Token = encodeWaitToken(key, id, minted.ExpiresAt)
		if step.Output, err = json.Marshal(minted); err != nil {
			return StepOutcome{}, minted, fmt.Errorf("mint wait token: %w", err)
		}
	} else {
		// Not minted: the lease is not current. The step record says so
		// (its output is never stored: the lease check refuses it).
		step.Output = []byte("null")
	}
	outs, err := s.StepsRecordBatch(ctx, []StepsRecordParams{step})
	if err != nil {
		return StepOutcome{}, minted, err
	}
	if outs[0].Err == nil && len(got) == 0 {
		// Lost to a concurrent copy of this report between the two
		// statements: transient, the worker sends it again.
		return outs[0], minted, fmt.Errorf("mint wait token: not visible yet, try again")
	}
	return outs[0], minted, nil
}

// WaitTokenCompleted is what completing a wait token did: the event it
// stored for its run.
type WaitTokenCompleted struct {
	TokenID uuid.UUID
	Event   SentEvent
}

// WaitTokensComplete completes a wait token: in one transaction it checks
// the token (signature, expiry, single use), stores payload (JSON; empty
// is null) as the event the token's run waits for — waking the run if it
// waits now — and marks the token used. The token names its namespace.
// A forged or damaged token is ErrWaitTokenForged, an expired one
// ErrWaitTokenExpired, a used one ErrWaitTokenUsed; a token whose run has
// finished is ErrConflict; a payload that is not JSON, or too large, is
// ErrInvalidArgument or ErrPayloadTooLarge. A refusal stores nothing.
func (s *Store) WaitTokensComplete(ctx context.Context, token string, payload []byte) (WaitTokenCompleted, error) {
	var out WaitTokenCompleted
	id, exp, b, err := decodeWaitToken(token)
	if err != nil {
		return out, err
	}
	if len(payload) == 0 {
		payload = []byte("null")
	}
	if !json.Valid(payload) {
		return out, invalidf("wait token payload is not JSON")
	}
	if err := s.h.CheckPayload(ctx, "wait token payload", payload); err != nil {
		return out, err
	}
	out.TokenID = id
	err = s.InTx(ctx, func(tx *Store) error {
		var (
			ns, event  string
			runID      uuid.UUID
			rowExp     time.Time
			used       bool
			key        []byte
			dbNow      time.Time
			errForged  = fmt.Errorf("complete wait token: %w", ErrWaitTokenForged)
			errExpired = fmt.Errorf("complete wait token: %w (at %s)", ErrWaitTokenExpired, exp.Format(time.RFC3339))
		)
		err := waitTokensGetSQL.QueryRow(ctx, tx.h.DB, pgx.NamedArgs{"token_id": id}).
			Scan(&ns, &runID, &event, &rowExp, &used, &key, &dbNow)
		if isNoRows(err) {
			return errForged
		}
		if err != nil {
			return mapErr("complete wait token", err)
		}
		// Checked in this order: a forged token learns nothing of a real
		// one's state.
		if !hmac.Equal(b[waitTokenSigned:], waitTokenMAC(key, b[:waitTokenSigned])) || !rowExp.Equal(exp) {
			return errForged
		}
		if !dbNow.Before(exp) {
			return errExpired
		}
		if used {
			return fmt.Errorf("complete wait token: %w", ErrWaitTokenUsed)
		}
		ev, err := tx.EventsSend(ctx, EventsSendParams{Namespace: ns, RunID: runID, Name: event, Payload: payload})
		if err != nil {
			return err
		}
		out.Event = ev
		_, err = waitTokensUseSQL.Exec(ctx, tx.h.DB, pgx.NamedArgs{"token_id": id, "event_id": ev.ID})
		return mapErr("complete wait token", err)
	})
	if err != nil {
		return WaitTokenCompleted{}, err
	}
	return out, nil
}
