package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// kagzi.publish (migration 031, docs/sql.md) called as an application
// would, checked against the store's PublishedEventsAdd.

func publishedCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM kagzi.published_events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// sqlPublish publishes through kagzi.publish; id nil makes one.
func sqlPublish(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, ns, name, payload string, id *uuid.UUID) (uuid.UUID, error) {
	var got uuid.UUID
	err := q.QueryRow(ctx, `SELECT kagzi.publish($1, $2, $3::jsonb, $4)`, ns, name, payload, id).Scan(&got)
	return got, err
}

// The SQL publish leaves the row the store's leaves, but for the id and
// time; a publish of an id again, by either path, adds nothing and
// returns the id; the id reused for another event is 23505 (ErrConflict
// in Go).
func TestSQLPublishIsAStorePublish(t *testing.T) {
	t.Parallel()
	s, pool := sqlEnv(t)
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	const payload = `{"order": {"id": "T-1", "amount": 12.5}}`
	viaSQL, err := sqlPublish(ctx, pool, "ns", "order.created", payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkUUIDv7Since(t, "event id", viaSQL, before)
	viaGo, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: "ns", Name: "order.created", Payload: []byte(payload)})
	if err != nil || !viaGo.Created {
		t.Fatalf("store publish: %+v %v", viaGo, err)
	}
	g, err := s.PublishedEventsGet(ctx, "ns", viaGo.ID)
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.PublishedEventsGet(ctx, "ns", viaSQL)
	if err != nil {
		t.Fatal(err)
	}
	if q.ID != viaSQL || q.Namespace != "ns" || q.Name != "order.created" || q.FannedOutAt != nil || len(q.Firings) != 0 ||
		q.PublishedAt.Before(before) || q.PublishedAt.After(time.Now().Add(time.Second)) {
		t.Fatalf("SQL-published event: %+v", q)
	}
	sprint := func(e store.PublishedEvent) string {
		return strings.Join([]string{e.Namespace, e.Name, string(e.Payload), fmt.Sprint(e.FannedOutAt)}, "|")
	}
	if a, b := sprint(q), sprint(g); a != b {
		t.Fatalf("SQL publish and store publish differ:\n%s\n%s", a, b)
	}

	// Idempotence, across the two paths; the first payload stays.
	for _, c := range []struct {
		what string
		id   uuid.UUID
	}{{"the SQL publish's id", viaSQL}, {"the store publish's id", viaGo.ID}} {
		id := c.id
		got, err := sqlPublish(ctx, pool, "ns", "order.created", `{"other": true}`, &id)
		if err != nil || got != c.id {
			t.Fatalf("SQL publish of %s again: %s %v", c.what, got, err)
		}
	}
	again, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: "ns", ID: viaSQL, Name: "order.created"})
	if err != nil || again.Created || again.ID != viaSQL {
		t.Fatalf("store publish of the SQL publish's id: %+v %v", again, err)
	}
	if q2, err := s.PublishedEventsGet(ctx, "ns", viaSQL); err != nil || string(q2.Payload) != string(q.Payload) {
		t.Fatalf("after publishing again: %s %v, want the first payload %s", q2.Payload, err, q.Payload)
	}
	// A caller's id that is new is the event's.
	mine := uuid.New()
	if got, err := sqlPublish(ctx, pool, "ns", "order.paid", "null", &mine); err != nil || got != mine {
		t.Fatalf("publish with the caller's id: %s %v", got, err)
	}
	if e, err := s.PublishedEventsGet(ctx, "ns", mine); err != nil || string(e.Payload) != "null" {
		t.Fatalf("event with the caller's id: %+v %v", e, err)
	}
	// A NULL payload is null, as an empty one in Go.
	if _, err := pool.Exec(ctx, `SELECT kagzi.publish('ns', 'order.void', NULL)`); err != nil {
		t.Fatal(err)
	}

	// The id of another event: refused as the store refuses it.
	n := publishedCount(t, pool)
	for _, c := range []struct{ what, ns, name string }{
		{"another name", "ns", "order.paid"},
		{"another namespace", "other", "order.created"},
	} {
		id := viaSQL
		_, err := sqlPublish(ctx, pool, c.ns, c.name, "null", &id)
		if got := sqlCode(err); got != "23505" || !strings.Contains(err.Error(), "published as another event") {
			t.Errorf("SQL publish with the id of %s: %v (SQLSTATE %q), want 23505", c.what, err, got)
		}
		if _, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: c.ns, ID: id, Name: c.name}); !errors.Is(err, store.ErrConflict) {
			t.Errorf("store publish with the id of %s: %v, want ErrConflict", c.what, err)
		}
	}
	if got := publishedCount(t, pool); got != n {
		t.Fatalf("conflicting publishes stored %d events", got-n)
	}
}

// What the store refuses, kagzi.publish refuses (22023 for a bad name,
// 54000 over the payload limit), storing nothing; what it takes, so does
// kagzi.publish.
func TestSQLPublishRefusals(t *testing.T) {
	t.Parallel()
	s, pool := sqlEnv(t)
	ctx := context.Background()
	if _, err := s.SettingsSet(ctx, store.Settings{PayloadWarnBytes: 10, PayloadMaxBytes: 20}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", protocol.MaxNameLen+1)
	for _, c := range []struct {
		what, ns, name, payload string
		code                    string
		goErr                   error
	}{
		{"empty namespace", "", "a", "1", "22023", store.ErrInvalidArgument},
		{"namespace with a dot", "a.b", "a", "1", "22023", store.ErrInvalidArgument},
		{"long namespace", long, "a", "1", "22023", store.ErrInvalidArgument},
		{"empty name", "ns", "", "1", "22023", store.ErrEventPattern},
		{"long name", "ns", long, "1", "22023", store.ErrEventPattern},
		{"name with a space", "ns", "order created", "1", "22023", store.ErrEventPattern},
		{"name with *", "ns", "order.*", "1", "22023", store.ErrEventPattern},
		{"name with >", "ns", "order.>", "1", "22023", store.ErrEventPattern},
		{"name with @", "ns", "a@b", "1", "22023", store.ErrEventPattern},
		{"name with a control character", "ns", "a\tb", "1", "22023", store.ErrEventPattern},
		{"leading dot", "ns", ".order", "1", "22023", store.ErrEventPattern},
		{"trailing dot", "ns", "order.", "1", "22023", store.ErrEventPattern},
		{"doubled dot", "ns", "order..created", "1", "22023", store.ErrEventPattern},
		{"only a dot", "ns", ".", "1", "22023", store.ErrEventPattern},
		{"payload over the limit", "ns", "a", `"0123456789abcdefghij"`, "54000", store.ErrPayloadTooLarge},
	} {
		_, err := sqlPublish(ctx, pool, c.ns, c.name, c.payload, nil)
		if got := sqlCode(err); got != c.code {
			t.Errorf("%s: %v (SQLSTATE %q), want %s", c.what, err, got, c.code)
		}
		if _, err := s.PublishedEventsAdd(ctx, store.PublishParams{Namespace: c.ns, Name: c.name, Payload: []byte(c.payload)}); !errors.Is(err, c.goErr) {
			t.Errorf("%s: the store says %v, want %v", c.what, err, c.goErr)
		}
	}
	if _, err := pool.Exec(ctx, `SELECT kagzi.publish(NULL, 'a')`); sqlCode(err) != "22023" {
		t.Errorf("null namespace: %v, want 22023", err)
	}
	if _, err := pool.Exec(ctx, `SELECT kagzi.publish('ns', NULL)`); sqlCode(err) != "22023" {
		t.Errorf("null name: %v, want 22023", err)
	}
	if n := publishedCount(t, pool); n != 0 {
		t.Fatalf("refused publishes stored %d events", n)
	}
	// The limit is the stored JSON's: 20 bytes pass; a name of 200 bytes
	// and one token passes.
	if _, err := sqlPublish(ctx, pool, "ns", "a", `"0123456789abcdefgh"`, nil); err != nil {
		t.Fatalf("payload at the limit: %v", err)
	}
	if _, err := sqlPublish(ctx, pool, "ns", long[1:], "1", nil); err != nil {
		t.Fatalf("name of %d bytes: %v", protocol.MaxNameLen, err)
	}
}

// The caller's transaction decides: rolled back, nothing is published and
// nothing notified; committed, the event notifies once (as the store's
// publish, TestNotifyPublishedEvent), the same id again nothing.
func TestSQLPublishInTheCallersTransaction(t *testing.T) {
	t.Parallel()
	pool, url := testdb.Pool(t)
	s := store.New(pool, store.Options{})
	ch := listen(t, url, 1)
	ctx := context.Background()
	var rolledBack uuid.UUID
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		if rolledBack, err = sqlPublish(ctx, tx, "ns", "order.created", `{"a": 1}`, nil); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatalf("transaction: %v", err)
	}
	if _, err := s.PublishedEventsGet(ctx, "ns", rolledBack); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("event after rollback: %v", err)
	}
	if n := publishedCount(t, pool); n != 0 {
		t.Fatalf("%d events after rollback", n)
	}
	var id uuid.UUID
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var err error
		id, err = sqlPublish(ctx, tx, "ns", "order.created", `{"a": 1}`, nil)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqlPublish(ctx, pool, "ns", "order.created", `{"a": 1}`, &id); err != nil {
		t.Fatal(err)
	}
	got := untilMarker(t, s, ch)
	if len(got) != 1 || got[0].Kind != store.NotifyEvent || got[0].Namespace != "ns" || got[0].RunID != id {
		t.Fatalf("notifications %+v, want one of event %s", got, id)
	}
	if pend, err := s.PublishedEventsPending(ctx, 10); err != nil || len(pend) != 1 || pend[0] != id {
		t.Fatalf("pending fan-outs: %v %v, want [%s]", pend, err, id)
	}
}

// Two transactions publish one id at once: the second waits for the
// first, then returns the id when the first committed the same event,
// refuses it (23505) when the first committed another, and publishes its
// own when the first rolled back. One row is left each time.
func TestSQLPublishConcurrentSameID(t *testing.T) {
	t.Parallel()
	s, pool := sqlEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		what       string
		commit     bool
		secondName string
		code       string
		wantName   string
	}{
		{"the same event, committed", true, "order.created", "", "order.created"},
		{"another event, committed", true, "order.paid", "23505", "order.created"},
		{"rolled back", false, "order.paid", "", "order.paid"},
	} {
		id := uuid.New()
		first, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = first.Rollback(ctx) }()
		if got, err := sqlPublish(ctx, first, "ns", "order.created", `1`, &id); err != nil || got != id {
			t.Fatalf("%s: first publish: %s %v", c.what, got, err)
		}
		type res struct {
			id  uuid.UUID
			err error
		}
		second := make(chan res, 1)
		go func() {
			got, err := sqlPublish(ctx, pool, "ns", c.secondName, `2`, &id)
			second <- res{got, err}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for waiting := 0; waiting == 0; {
			if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%kagzi.publish%'`).Scan(&waiting); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the second publish never waited for the first", c.what)
			}
			time.Sleep(5 * time.Millisecond) // a poll's pace, not a synchronisation
		}
		if c.commit {
			err = first.Commit(ctx)
		} else {
			err = first.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		r := <-second
		if got := sqlCode(r.err); got != c.code || (c.code == "" && r.id != id) {
			t.Errorf("%s: second publish: %s %v (SQLSTATE %q), want %s", c.what, r.id, r.err, got, c.code)
		}
		if e, err := s.PublishedEventsGet(ctx, "ns", id); err != nil || e.Name != c.wantName {
			t.Errorf("%s: event %+v %v, want %s", c.what, e, err, c.wantName)
		}
	}
}
