package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

// The functions of migration 027 (docs/sql.md): kagzi.start_run and
// kagzi.send_event, called as an application would, checked through the
// store.

// sqlEnv is a fresh database with a Store and a pool for plain SQL.
func sqlEnv(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := testdb.Pool(t)
	return store.New(pool, store.Options{}), pool
}

func sqlCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func runCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM kagzi.workflow_runs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSQLStartRunIsAStoreStart(t *testing.T) {
	t.Parallel()
	s, pool := sqlEnv(t)
	ctx := context.Background()
	if _, err := s.DefaultsSet(ctx, "ns", "Ship", "v3"); err != nil {
		t.Fatal(err)
	}
	before := time.Now().Add(-time.Second)
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	deadline := at.Add(time.Hour)
	var id uuid.UUID
	err := pool.QueryRow(ctx, `SELECT kagzi.start_run('ns', 'Ship', '{"order": 7}', 'orders', 'order-7',
		start_at => $1, priority => 5, deadline => $2)`, at, deadline).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	checkUUIDv7Since(t, "run id", id, before)
	run, err := s.RunsGet(ctx, "ns", id)
	if err != nil {
		t.Fatal(err)
	}
	if run.Namespace != "ns" || run.Type != "Ship" || run.Queue != "orders" || run.ExternalID != "order-7" || run.Version != "v3" ||
		run.Status != store.StatusPending || run.Priority != 5 || string(run.Input) != `{"order": 7}` || run.Attempts != 0 ||
		run.AvailableAt == nil || !run.AvailableAt.Equal(at) || run.DeadlineAt == nil || !run.DeadlineAt.Equal(deadline) ||
		run.RetryPolicy != nil || run.ParentRunID != nil || run.ScheduleID != nil {
		t.Fatalf("run: %+v", run)
	}
	// The store's start of the same run reads back the same, but for
	// the id and times.
	twin, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "orders", Type: "Ship", ExternalID: "order-8",
		Input: []byte(`{"order": 7}`), AvailableAt: &at, DeadlineAt: &deadline, Priority: 5})
	if err != nil {
		t.Fatal(err)
	}
	twin, err = s.RunsGet(ctx, "ns", twin.ID)
	if err != nil {
		t.Fatal(err)
	}
	twin.ID, twin.ExternalID, twin.CreatedAt, twin.TraceContext = run.ID, run.ExternalID, run.CreatedAt, run.TraceContext
	if a, b := strings.ReplaceAll(sprintRun(run), " ", ""), strings.ReplaceAll(sprintRun(twin), " ", ""); a != b {
		t.Fatalf("SQL start and store start differ:\n%s\n%s", a, b)
	}

	// Defaults: input null, queue default, due now, the type's version
	// unpinned when it has no default.
	if err := pool.QueryRow(ctx, `SELECT kagzi.start_run('ns', 'Plain')`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	run, err = s.RunsGet(ctx, "ns", id)
	if err != nil || run.Queue != "default" || string(run.Input) != "null" || run.Version != "" || run.Priority != 0 ||
		run.ExternalID != "" || run.AvailableAt == nil || run.AvailableAt.After(time.Now().Add(time.Second)) || run.DeadlineAt != nil {
		t.Fatalf("run with defaults: %+v %v", run, err)
	}
}

func sprintRun(r store.Run) string {
	return strings.Join([]string{r.ID.String(), r.Namespace, r.ExternalID, r.Queue, r.Type, r.Version, string(r.Status),
		string(r.Input), r.AvailableAt.String(), r.DeadlineAt.String(), r.TraceContext, time.Duration(r.Priority).String()}, "|")
}

// An external id a live run holds names that run (the Go client's
// default id reuse); once it finished, a new run.
func TestSQLStartRunExternalID(t *testing.T) {
	t.Parallel()
	s, pool := sqlEnv(t)
	ctx := context.Background()
	start := func() uuid.UUID {
		t.Helper()
		var id uuid.UUID
		if err := pool.QueryRow(ctx, `SELECT kagzi.start_run('ns', 'T', external_id => 'once')`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	first := start()
	goRun, created, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "default", Type: "T", ExternalID: "once"})
	if err != nil || created || goRun.ID != first {
		t.Fatalf("store start with the SQL run's external id: %s created=%v %v, want %s", goRun.ID, created, err, first)
	}
	if again := start(); again != first {
		t.Fatalf("second start: %s, want %s", again, first)
	}
	if _, err := s.RunsCancel(ctx, "ns", first); err != nil {
		t.Fatal(err)
	}
	if next := start(); next == first {
		t.Fatal("a finished run's external id did not name a new run")
	}
	if n := runCount(t, pool); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
}

func TestSQLStartRunRefusals(t *testing.T) {
	t.Parallel()
	s, pool := sqlEnv(t)
	ctx := context.Background()
	if _, err := s.SettingsSet(ctx, store.Settings{PayloadWarnBytes: 10, PayloadMaxBytes: 20}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", protocol.MaxNameLen+1)
	for _, c := range []struct {
		what, sql string
		args      []any
		code      string
	}{
		{"empty namespace", `SELECT kagzi.start_run('', 'T')`, nil, "22023"},
		{"null namespace", `SELECT kagzi.start_run(NULL, 'T')`, nil, "22023"},
		{"namespace with a dot", `SELECT kagzi.start_run('a.b', 'T')`, nil, "22023"},
		{"long namespace", `SELECT kagzi.start_run($1, 'T')`, []any{long}, "22023"},
		{"type with a space", `SELECT kagzi.start_run('ns', 'a b')`, nil, "22023"},
		{"type with a wildcard", `SELECT kagzi.start_run('ns', 'a*')`, nil, "22023"},
		{"empty type", `SELECT kagzi.start_run('ns', '')`, nil, "22023"},
		{"queue with @", `SELECT kagzi.start_run('ns', 'T', queue => 'a@b')`, nil, "22023"},
		{"null queue", `SELECT kagzi.start_run('ns', 'T', queue => NULL)`, nil, "22023"},
		{"version with >", `SELECT kagzi.start_run('ns', 'T', version => 'v>1')`, nil, "22023"},
		{"long external id", `SELECT kagzi.start_run('ns', 'T', external_id => $1)`, []any{long}, "22023"},
		{"external id with a control character", `SELECT kagzi.start_run('ns', 'T', external_id => E'a\tb')`, nil, "22023"},
		{"null priority", `SELECT kagzi.start_run('ns', 'T', priority => NULL)`, nil, "22023"},
		{"infinite start", `SELECT kagzi.start_run('ns', 'T', start_at => 'infinity')`, nil, "22023"},
		{"input over the limit", `SELECT kagzi.start_run('ns', 'T', '"0123456789abcdefghij"')`, nil, "54000"},
	} {
		_, err := pool.Exec(ctx, c.sql, c.args...)
		if got := sqlCode(err); got != c.code {
			t.Errorf("%s: %v (SQLSTATE %q), want %s", c.what, err, got, c.code)
		}
	}
	if n := runCount(t, pool); n != 0 {
		t.Fatalf("refused starts made %d runs", n)
	}
	// The limit is the stored JSON's: 20 bytes pass.
	if _, err := pool.Exec(ctx, `SELECT kagzi.start_run('ns', 'T', '"0123456789abcdefgh"')`); err != nil {
		t.Fatalf("input at the limit: %v", err)
	}
}

// The caller's transaction decides: rolled back, nothing is left.
func TestSQLStartRunInTheCallersTransaction(t *testing.T) {
	t.Parallel()
	s, pool := sqlEnv(t)
	ctx := context.Background()
	var id uuid.UUID
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT kagzi.start_run('ns', 'T', external_id => 'tx')`).Scan(&id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT kagzi.send_event('ns', $1, 'go')`, id); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatalf("transaction: %v", err)
	}
	if _, err := s.RunsGet(ctx, "ns", id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("run after rollback: %v", err)
	}
	var events int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM kagzi.workflow_events`).Scan(&events); err != nil || events != 0 || runCount(t, pool) != 0 {
		t.Fatalf("after rollback: %d events, %d runs, %v", events, runCount(t, pool), err)
	}
}

// kagzi.send_event does what store.EventsSend does: the same event rows
// and the same wake-up, for a run waiting for the event, one running and
// one pending; and the same refusals.
func TestSQLSendEventMatchesTheStore(t *testing.T) {
	t.Parallel()
	s, pool := sqlEnv(t)
	ctx := context.Background()
	sqlSend := func(id uuid.UUID, name, payload string) uuid.UUID {
		t.Helper()
		var ev uuid.UUID
		if err := pool.QueryRow(ctx, `SELECT kagzi.send_event('ns', $1, $2, $3::jsonb)`, id, name, payload).Scan(&ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	type state struct {
		status store.RunStatus
		due    bool // claimable now
		seq    int64
		events string
	}
	read := func(id uuid.UUID) state {
		t.Helper()
		var st state
		var evs []string
		err := pool.QueryRow(ctx, `SELECT r.status, coalesce(r.available_at <= now(), false), r.event_seq,
			coalesce((SELECT array_agg(e.name || '=' || convert_from(e.payload, 'UTF8') || '#' || e.seq ORDER BY e.created_at, e.event_id)
				FROM kagzi.workflow_events e WHERE e.run_id = r.run_id), '{}')
			FROM kagzi.workflow_runs r WHERE r.run_id = $1`, id).Scan(&st.status, &st.due, &st.seq, &evs)
		if err != nil {
			t.Fatal(err)
		}
		st.events = strings.Join(evs, ",")
		return st
	}
	waiting := func() uuid.UUID {
		t.Helper()
		l, _ := leasedRun(t, s, "ns")
		until := time.Now().Add(time.Hour)
		res, err := s.EventsReceive(ctx, store.EventsReceiveParams{Lease: l, StepID: "w", Attempt: 1, Name: "approved", Until: &until, Suspend: true})
		if err != nil || res.Status != store.EventWaiting {
			t.Fatalf("wait: %+v %v", res, err)
		}
		return l.RunID
	}
	running := func() uuid.UUID { l, _ := leasedRun(t, s, "ns"); return l.RunID }
	pending := func() uuid.UUID {
		run, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T"})
		if err != nil {
			t.Fatal(err)
		}
		return run.ID
	}
	for _, c := range []struct {
		what string
		make func() uuid.UUID
		want state // after the two sends
	}{
		{"waiting", waiting, state{store.StatusSleeping, true, 0, `other={"a": 1}#0,approved="yes"#0`}},
		{"running", running, state{store.StatusRunning, false, 2, `other={"a": 1}#1,approved="yes"#2`}},
		{"pending", pending, state{store.StatusPending, true, 0, `other={"a": 1}#0,approved="yes"#0`}},
	} {
		viaGo, viaSQL := c.make(), c.make()
		sendEvent(t, s, "ns", viaGo, "other", `{"a": 1}`)
		if ev := sendEvent(t, s, "ns", viaGo, "approved", `"yes"`); ev.Woken != (c.what == "waiting") {
			t.Errorf("%s: store woke %v", c.what, ev.Woken)
		}
		if st := read(viaSQL); c.what == "waiting" && st.due {
			t.Fatalf("%s: due before the event", c.what)
		}
		sqlSend(viaSQL, "other", `{"a": 1}`)
		if st := read(viaSQL); c.what == "waiting" && st.due {
			t.Fatalf("%s: another event woke it", c.what)
		}
		ev := sqlSend(viaSQL, "approved", `"yes"`)
		if ev.Version() != 7 {
			t.Errorf("%s: event id %s is not a UUID v7", c.what, ev)
		}
		g, q := read(viaGo), read(viaSQL)
		if g != c.want || q != c.want {
			t.Errorf("%s: after the store's sends %+v, after SQL's %+v, want %+v", c.what, g, q, c.want)
		}
	}

	// Refusals, each with nothing stored.
	done := pending()
	if _, err := s.RunsCancel(ctx, "ns", done); err != nil {
		t.Fatal(err)
	}
	live := pending()
	tpl := uuid.Nil
	if err := pool.QueryRow(ctx, `INSERT INTO kagzi.workflow_runs (run_id, namespace_id, task_queue, workflow_type, status, cron_expr, available_at)
		VALUES (gen_random_uuid(), 'ns', 'q', 'T', 'SCHEDULED', '* * * * *', now() + interval '1 hour') RETURNING run_id`).Scan(&tpl); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SettingsSet(ctx, store.Settings{PayloadWarnBytes: 10, PayloadMaxBytes: 20}); err != nil {
		t.Fatal(err)
	}
	var before int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM kagzi.workflow_events`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		args []any
		code string
	}{
		{"unknown run", []any{"ns", uuid.New(), "go", "1"}, "P0002"},
		{"run of another namespace", []any{"other", live, "go", "1"}, "P0002"},
		{"finished run", []any{"ns", done, "go", "1"}, "55000"},
		{"schedule template", []any{"ns", tpl, "go", "1"}, "55000"},
		{"null run id", []any{"ns", nil, "go", "1"}, "22023"},
		{"empty name", []any{"ns", live, "", "1"}, "22023"},
		{"name with a space", []any{"ns", live, "a b", "1"}, "22023"},
		{"bad namespace", []any{"a.b", live, "go", "1"}, "22023"},
		{"payload over the limit", []any{"ns", live, "go", `"0123456789abcdefghij"`}, "54000"},
	} {
		_, err := pool.Exec(ctx, `SELECT kagzi.send_event($1, $2, $3, $4::jsonb)`, c.args...)
		if got := sqlCode(err); got != c.code {
			t.Errorf("%s: %v (SQLSTATE %q), want %s", c.what, err, got, c.code)
		}
	}
	var after int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM kagzi.workflow_events`).Scan(&after); err != nil || after != before {
		t.Fatalf("refused sends stored %d events (%v)", after-before, err)
	}
	// An event name may hold a dot, as in Go.
	sqlSend(live, "order.paid", "null")
}

// kagzi.token_refused refuses the characters protocol.ValidToken and
// protocol.ValidEventName refuse, over every assigned code point (Go
// also refuses unassigned ones, which the SQL rule lets through).
func TestSQLTokenRuleMatchesGo(t *testing.T) {
	t.Parallel()
	_, pool := sqlEnv(t)
	ctx := context.Background()
	var runes []string
	for r := rune(1); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) || !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co) {
			continue
		}
		// The private use planes (15 and 16) are one range: their ends
		// stand for them.
		if r >= 0xf0000 && r&0xffff > 0xf && r&0xffff < 0xfff0 {
			continue
		}
		runes = append(runes, "a"+string(r))
	}
	for _, event := range []bool{false, true} {
		var refused []string
		err := pool.QueryRow(ctx, `SELECT coalesce(array_agg(s), '{}') FROM unnest($1::text[]) s WHERE kagzi.token_refused(s, $2)`,
			runes, event).Scan(&refused)
		if err != nil {
			t.Fatal(err)
		}
		sqlRefuses := make(map[string]bool, len(refused))
		for _, s := range refused {
			sqlRefuses[s] = true
		}
		var diff []string
		for _, s := range runes {
			goErr := protocol.ValidToken("x", s)
			if event {
				goErr = protocol.ValidEventName(s)
			}
			if (goErr != nil) != sqlRefuses[s] && len(diff) < 20 {
				r, _ := utf8.DecodeLastRuneInString(s)
				diff = append(diff, fmt.Sprintf("U+%04X (Go refuses: %v)", r, goErr != nil))
			}
		}
		if len(runes) < 100000 || len(refused) < 1000 {
			t.Fatalf("%d code points, %d refused: not the sweep meant", len(runes), len(refused))
		}
		if len(diff) > 0 {
			t.Errorf("event=%v: Go and SQL disagree on %v", event, diff)
		}
	}
}

// checkUUIDv7Since fails the test unless id is a UUIDv7 made between
// before and now (a second of clock skew allowed): the SQL functions mint
// the same kind of id as the Go paths.
func checkUUIDv7Since(t *testing.T, what string, id uuid.UUID, before time.Time) {
	t.Helper()
	if id.Version() != 7 || id.Variant() != uuid.RFC4122 {
		t.Fatalf("%s %s: version %d, variant %v", what, id, id.Version(), id.Variant())
	}
	sec, nsec := id.Time().UnixTime()
	if made := time.Unix(sec, nsec); made.Before(before) || made.After(time.Now().Add(time.Second)) {
		t.Fatalf("%s %s carries time %v", what, id, made)
	}
}
