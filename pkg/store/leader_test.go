package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/testdb"
	"github.com/kagzi/kagzi/pkg/store"
)

// term is one leadership term seen by a test Leader.
type term struct {
	id    int
	start time.Time
	ended chan error // receives the cause when the term's context ends
}

func campaign(t *testing.T, url string, key int64, id int, terms chan<- term) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &store.Leader{URL: url, LockKey: key, Retry: 20 * time.Millisecond,
		Lead: func(ctx context.Context) error {
			tm := term{id: id, start: time.Now(), ended: make(chan error, 1)}
			terms <- tm
			<-ctx.Done()
			tm.ended <- context.Cause(ctx)
			return nil
		}}
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func nextTerm(t *testing.T, terms <-chan term, within time.Duration) term {
	t.Helper()
	select {
	case tm := <-terms:
		return tm
	case <-time.After(within):
		t.Fatalf("no leader within %v", within)
		return term{}
	}
}

func TestLeaderFailsOverWhenSessionEnds(t *testing.T) {
	t.Parallel()
	pool, url := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	const key = 0x5eed01
	terms := make(chan term, 10)
	campaign(t, url, key, 1, terms)
	campaign(t, url, key, 2, terms)

	first := nextTerm(t, terms, 10*time.Second)
	// Only one leads while the first holds the lock.
	select {
	case tm := <-terms:
		t.Fatalf("replica %d leads while replica %d holds the lock", tm.id, first.id)
	case <-time.After(300 * time.Millisecond):
	}
	killed := time.Now()
	n, err := s.LockHolderTerminate(context.Background(), key)
	if err != nil || n != 1 {
		t.Fatalf("terminate lock holder: %d sessions, %v", n, err)
	}
	second := nextTerm(t, terms, 2*time.Second)
	if second.id == first.id {
		t.Fatalf("replica %d leads again; the standby should have taken over", second.id)
	}
	if d := second.start.Sub(killed); d > 2*time.Second {
		t.Fatalf("standby took over after %v, want within 2 s", d)
	}
	select {
	case cause := <-first.ended:
		if cause == nil || errors.Is(cause, context.Canceled) {
			t.Fatalf("deposed leader's context ended with %v, want the lost session", cause)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("deposed leader's context did not end")
	}
	// The deposed replica campaigns again (its lock request waits) and
	// takes over in turn.
	deadline := time.Now().Add(10 * time.Second)
	for {
		held, waiting, err := s.LockSessions(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if held == 1 && waiting == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the deposed replica does not campaign again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.LockHolderTerminate(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	third := nextTerm(t, terms, 2*time.Second)
	if third.id != first.id {
		t.Fatalf("replica %d leads, want the first replica back", third.id)
	}
}

func TestLeaderStepsDownWhenLeadReturns(t *testing.T) {
	t.Parallel()
	_, url := testdb.Pool(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := make(chan struct{}, 10)
	errs := make(chan error, 10)
	l := &store.Leader{URL: url, LockKey: 0x5eed02, Retry: 10 * time.Millisecond,
		Lead: func(context.Context) error {
			calls <- struct{}{}
			return errors.New("boom")
		},
		OnError: func(err error) { errs <- err },
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = l.Run(ctx) }()
	for i := 0; i < 2; i++ {
		select {
		case <-calls:
		case <-time.After(10 * time.Second):
			t.Fatal("Lead was not called again after it returned")
		}
	}
	select {
	case err := <-errs:
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("OnError got %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("Lead's error was not reported")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
