package pgsession_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/pgsession"
	"github.com/kagzi/kagzi/tests/testdb"
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
	l := &pgsession.Leader{URL: url, LockKey: key, Retry: 20 * time.Millisecond,
		Lead: func(ctx context.Context, _ int64) error {
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
	l := &pgsession.Leader{URL: url, LockKey: 0x5eed02, Retry: 10 * time.Millisecond,
		Lead: func(context.Context, int64) error {
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

// A leader's writes run under its term: once a new term is open, a write
// of the old one is refused and writes nothing, and an election waits for
// the old term's write in flight instead of overtaking it.
func TestFencedWritesEndWithTheTerm(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ctx := context.Background()
	first, err := store.LeadersElect(ctx, pool, "reaper")
	if err != nil || first != 1 {
		t.Fatalf("first term %d, %v", first, err)
	}
	write := func(term int64, typ string) error {
		return s.Fenced(ctx, "reaper", term, func(tx *store.Store) error {
			_, _, err := tx.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: typ})
			return err
		})
	}
	if err := write(first, "A"); err != nil {
		t.Fatalf("write of the current term: %v", err)
	}
	if err := write(first+1, "B"); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("write of a term not yet open: %v, want ErrLeaseLost", err)
	}

	// A write of the first term holds its fence while a new election runs.
	inFence := make(chan struct{})
	release := make(chan struct{})
	writeDone := make(chan error, 1)
	go func() {
		writeDone <- s.Fenced(ctx, "reaper", first, func(tx *store.Store) error {
			close(inFence)
			<-release
			_, _, err := tx.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "C"})
			return err
		})
	}()
	<-inFence
	elected := make(chan int64, 1)
	go func() {
		term, err := store.LeadersElect(ctx, pool, "reaper")
		if err != nil {
			t.Error(err)
		}
		elected <- term
	}()
	select {
	case term := <-elected:
		t.Fatalf("election to term %d overtook a write of the term before it", term)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	if err := <-writeDone; err != nil {
		t.Fatalf("write begun under its term: %v", err)
	}
	second := <-elected
	if second != first+1 {
		t.Fatalf("second term %d, want %d", second, first+1)
	}
	if err := write(first, "D"); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("write of the old term: %v, want ErrLeaseLost", err)
	}
	for typ, want := range map[string]int{"A": 1, "B": 0, "C": 1, "D": 0} {
		runs, _, err := s.RunsList(ctx, store.RunsListParams{Namespace: "ns", Type: typ, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != want {
			t.Errorf("runs of type %s: %d, want %d", typ, len(runs), want)
		}
	}
}
