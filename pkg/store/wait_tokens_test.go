package store_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// signWaitToken builds a token as docs/callbacks.md describes it, from
// outside the store: the format is a contract.
func signWaitToken(key []byte, id uuid.UUID, exp time.Time) string {
	b := make([]byte, 25, 57)
	b[0] = 1
	copy(b[1:17], id[:])
	binary.BigEndian.PutUint64(b[17:25], uint64(exp.Unix()))
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kagzi wait token"))
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(m.Sum(b))
}

func mintToken(t *testing.T, s *store.Store, l store.Lease, step string, ttl time.Duration) protocol.WaitTokenMinted {
	t.Helper()
	o, minted, err := s.WaitTokensMint(context.Background(), store.WaitTokensMintParams{Lease: l, StepID: step,
		ExpiresAt: time.Now().Add(ttl)})
	if err != nil || o.Err != nil {
		t.Fatalf("mint %s: %v %v", step, err, o.Err)
	}
	return minted
}

// eventCount is how many events and used tokens the database holds.
func eventCount(t *testing.T, pool *pgxpool.Pool) (events, used int) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM kagzi.workflow_events),
		(SELECT count(*) FROM kagzi.wait_tokens WHERE used_at IS NOT NULL)`).Scan(&events, &used)
	if err != nil {
		t.Fatal(err)
	}
	return events, used
}

// A minted token is memoized (a repeated mint is the same token and
// records the same step), completes once into the event its run waits
// for, and forged, expired and reused tokens are refused with their
// typed errors, storing nothing.
func TestWaitTokensMintAndComplete(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	l, _ := leasedRun(t, s, "ns")
	minted := mintToken(t, s, l, "token:approval", time.Hour)
	if minted.Token == "" || minted.Event != protocol.WaitTokenEvent(protocol.WaitTokenID(l.RunID, "token:approval")) ||
		time.Until(minted.ExpiresAt) > time.Hour+time.Second || time.Until(minted.ExpiresAt) < 59*time.Minute {
		t.Fatalf("minted: %+v", minted)
	}
	again := mintToken(t, s, l, "token:approval", 2*time.Hour)
	if again != minted {
		t.Fatalf("a repeated mint made %+v, want %+v", again, minted)
	}
	steps, err := s.StepsList(ctx, "ns", l.RunID)
	if err != nil || len(steps) != 1 || steps[0].Kind != store.StepFunction || steps[0].Status != store.StepCompleted {
		t.Fatalf("steps: %+v %v", steps, err)
	}
	var out protocol.WaitTokenMinted
	if err := json.Unmarshal(steps[0].Output, &out); err != nil || out != minted {
		t.Fatalf("step output %s: %v", steps[0].Output, err)
	}

	// Refusals store nothing.
	var key []byte
	if err := pool.QueryRow(ctx, `SELECT key FROM kagzi.wait_token_keys WHERE namespace_id = 'ns'`).Scan(&key); err != nil || len(key) != 32 {
		t.Fatalf("key: %x %v", key, err)
	}
	id := protocol.WaitTokenID(l.RunID, "token:approval")
	if got := signWaitToken(key, id, minted.ExpiresAt); got != minted.Token {
		t.Fatalf("documented format gives %s, store minted %s", got, minted.Token)
	}
	forged := []string{
		"", "not-a-token", minted.Token[:len(minted.Token)-2] + "AA",
		signWaitToken(make([]byte, 32), id, minted.ExpiresAt),              // another key
		signWaitToken(key, id, minted.ExpiresAt.Add(time.Hour)),            // extended expiry
		signWaitToken(key, uuid.New(), minted.ExpiresAt),                   // unknown token
		signWaitToken(key, id, minted.ExpiresAt) + "AAAAAAAAAAAAAAAAAAAAA", // too long
	}
	for _, tok := range forged {
		if _, err := s.WaitTokensComplete(ctx, tok, []byte(`{"ok":true}`)); !errors.Is(err, store.ErrWaitTokenForged) {
			t.Errorf("forged %q: want ErrWaitTokenForged, got %v", tok, err)
		}
	}
	for _, p := range []string{`{"ok":`, "nope"} {
		if _, err := s.WaitTokensComplete(ctx, minted.Token, []byte(p)); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("payload %q: want ErrInvalidArgument, got %v", p, err)
		}
	}
	if ev, used := eventCount(t, pool); ev != 0 || used != 0 {
		t.Fatalf("after refusals: %d events, %d used tokens", ev, used)
	}

	done, err := s.WaitTokensComplete(ctx, minted.Token, []byte(`{"ok":true}`))
	if err != nil || done.TokenID != id || done.Event.RunID != l.RunID || done.Event.Name != minted.Event {
		t.Fatalf("complete: %+v %v", done, err)
	}
	_, err = s.WaitTokensComplete(ctx, minted.Token, []byte(`{"ok":false}`))
	if !errors.Is(err, store.ErrWaitTokenUsed) || !errors.Is(err, store.ErrConflict) {
		t.Fatalf("reuse: want ErrWaitTokenUsed, got %v", err)
	}
	if ev, used := eventCount(t, pool); ev != 1 || used != 1 {
		t.Fatalf("after completion and reuse: %d events, %d used tokens", ev, used)
	}
	got, err := s.EventsConsume(ctx, l, minted.Event, "event:"+minted.Event)
	if err != nil || string(got.Payload) != `{"ok":true}` {
		t.Fatalf("the run's event: %+v %v", got, err)
	}

	// An expired token, validly signed, is refused.
	second := mintToken(t, s, l, "token:approval#2", time.Minute)
	past := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
	id2 := protocol.WaitTokenID(l.RunID, "token:approval#2")
	if _, err := pool.Exec(ctx, `UPDATE kagzi.wait_tokens SET expires_at = $1 WHERE token_id = $2`, past, id2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WaitTokensComplete(ctx, second.Token, nil); !errors.Is(err, store.ErrWaitTokenForged) {
		t.Fatalf("token whose expiry differs from its row: want ErrWaitTokenForged, got %v", err)
	}
	if _, err := s.WaitTokensComplete(ctx, signWaitToken(key, id2, past), nil); !errors.Is(err, store.ErrWaitTokenExpired) {
		t.Fatalf("expired: want ErrWaitTokenExpired, got %v", err)
	}
	if ev, used := eventCount(t, pool); ev != 1 || used != 1 {
		t.Fatalf("after the expired token: %d events, %d used tokens", ev, used)
	}
}

// Minting checks the expiry's bounds and the lease.
func TestWaitTokensMintRefusals(t *testing.T) {
	t.Parallel()
	s := testdb.Store(t)
	ctx := context.Background()
	stale, current := reclaimedRun(t, s, "ns")
	for _, exp := range []time.Time{time.Now().Add(-time.Second), time.Now().Add(protocol.MaxWaitTokenTTL + 2*time.Hour)} {
		_, _, err := s.WaitTokensMint(ctx, store.WaitTokensMintParams{Lease: current, StepID: "token:a", ExpiresAt: exp})
		if !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("expiry %s: want ErrInvalidArgument, got %v", exp, err)
		}
	}
	o, _, err := s.WaitTokensMint(ctx, store.WaitTokensMintParams{Lease: stale, StepID: "token:a", ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil || !errors.Is(o.Err, store.ErrLeaseLost) {
		t.Fatalf("stale lease: want ErrLeaseLost, got %v %v", o.Err, err)
	}
	mintToken(t, s, current, "token:a", protocol.MaxWaitTokenTTL)
}

// Racing completions of one token: exactly one stores its event.
func TestWaitTokensCompleteRace(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	l, _ := leasedRun(t, s, "ns")
	minted := mintToken(t, s, l, "token:race", time.Hour)
	const n = 8
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := s.WaitTokensComplete(context.Background(), minted.Token, []byte(`1`))
			errs <- err
		}()
	}
	ok := 0
	for range n {
		switch err := <-errs; {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrWaitTokenUsed):
			t.Errorf("a racing completion: %v", err)
		}
	}
	if ev, used := eventCount(t, pool); ok != 1 || ev != 1 || used != 1 {
		t.Fatalf("%d completions succeeded, %d events, %d used tokens; want 1 each", ok, ev, used)
	}
}
