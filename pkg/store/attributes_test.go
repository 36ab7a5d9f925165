package store_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/internal/stmtcount"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/tests/testdb"
)

func (e *env) declare(name string, kind store.AttributeKind) {
	e.t.Helper()
	if err := e.s.AttributesDeclare(e.ctx, "ns", name, kind); err != nil {
		e.t.Fatalf("declare %s: %v", name, err)
	}
}

func (e *env) query(q string) []uuid.UUID {
	e.t.Helper()
	runs, _, err := e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns", Query: q})
	if err != nil {
		e.t.Fatalf("list %q: %v", q, err)
	}
	ids := []uuid.UUID{}
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestAttributesDeclare(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.declare("customer", store.AttributeKeyword)
	e.declare("customer", store.AttributeKeyword) // again: nothing
	if err := e.s.AttributesDeclare(e.ctx, "ns", "customer", store.AttributeInt); !errors.Is(err, store.ErrConflict) {
		t.Errorf("redeclare with another kind: %v", err)
	}
	for name, kind := range map[string]store.AttributeKind{"1x": "keyword", "status": "keyword", "and": "keyword",
		strings.Repeat("a", 65): "keyword", "ok": "decimal"} {
		if err := e.s.AttributesDeclare(e.ctx, "ns", name, kind); !errors.Is(err, store.ErrAttribute) || !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("declare %q %s: %v", name, kind, err)
		}
	}
	for i := 1; i < store.MaxAttributesDeclared; i++ {
		e.declare(fmt.Sprintf("a%d", i), store.AttributeInt)
	}
	if err := e.s.AttributesDeclare(e.ctx, "ns", "over", store.AttributeInt); err == nil || !strings.Contains(err.Error(), "maximum") {
		t.Errorf("declare the 101st: %v", err)
	}
	list, err := e.s.AttributesList(e.ctx, "ns")
	if err != nil || len(list) != store.MaxAttributesDeclared || list[0].Name != "a1" {
		t.Fatalf("list: %d %v", len(list), err)
	}
	r := e.create(store.RunsCreateParams{Attributes: map[string]any{"a1": 5}})
	if err := e.s.AttributesDelete(e.ctx, "ns", "a1"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("delete a held attribute: %v", err)
	}
	if err := e.s.AttributesDelete(e.ctx, "ns", "a2"); err != nil {
		t.Errorf("delete: %v", err)
	}
	if err := e.s.AttributesDelete(e.ctx, "ns", "a2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete again: %v", err)
	}
	if got, err := e.s.RunAttributes(e.ctx, "ns", r.ID); err != nil || got["a1"] != int64(5) {
		t.Errorf("run attributes: %v %v", got, err)
	}
}

func TestRunsCreateAttributesChecked(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.declare("customer", store.AttributeKeyword)
	e.declare("tags", store.AttributeKeyword)
	e.declare("note", store.AttributeText)
	e.declare("amount", store.AttributeInt)
	e.declare("score", store.AttributeFloat)
	e.declare("vip", store.AttributeBool)
	e.declare("due", store.AttributeTime)
	due := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	r := e.create(store.RunsCreateParams{Attributes: map[string]any{"customer": "42", "tags": []string{"a", "b"},
		"note": "hello", "amount": int32(7), "score": 3, "vip": true, "due": due}})
	got, err := e.s.RunAttributes(e.ctx, "ns", r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"customer": "42", "tags": []string{"a", "b"}, "note": "hello", "amount": int64(7),
		"score": float64(3), "vip": true}
	for k, v := range want {
		if fmt.Sprint(got[k]) != fmt.Sprint(v) {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if d, _ := got["due"].(time.Time); !d.Equal(due) {
		t.Errorf("due = %v", got["due"])
	}
	for what, c := range map[string]struct {
		attrs map[string]any
		want  string
	}{
		"undeclared":    {map[string]any{"nope": "x"}, `"nope": not declared (declared: amount, customer, due, note, score, tags, vip)`},
		"mismatch":      {map[string]any{"amount": "7"}, `"amount" (int): a string does not fit`},
		"float for int": {map[string]any{"amount": 1.5}, "float64 does not fit"},
		"list on text":  {map[string]any{"note": []string{"a"}}, "[]string does not fit"},
		"other type":    {map[string]any{"customer": struct{}{}}, "does not fit"},
		"long keyword":  {map[string]any{"customer": strings.Repeat("x", 257)}, "above the maximum 256"},
		"long text":     {map[string]any{"note": strings.Repeat("x", 2049)}, "above the maximum 2048"},
		"long list":     {map[string]any{"tags": make([]string, 33)}, "a list of 33 values"},
		"NaN":           {map[string]any{"score": float64Nan()}, "not a finite number"},
	} {
		_, _, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", Attributes: c.attrs})
		if !errors.Is(err, store.ErrAttribute) || !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrAttribute with %q", what, err, c.want)
		}
	}
	for n := range manyTexts(9) {
		e.declare(n, store.AttributeText)
	}
	if _, _, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", Attributes: manyTexts(9)}); !errors.Is(err, store.ErrAttribute) || !strings.Contains(err.Error(), "above the maximum 16384") {
		t.Errorf("total size: %v", err)
	}
	// A start with flow control (an id reuse policy) stores them too.
	f := e.create(store.RunsCreateParams{ExternalID: "x1", IDReuse: store.IDReuseReject, Attributes: map[string]any{"customer": "7"}})
	if ids := e.query(`customer = '7'`); !slices.Equal(ids, []uuid.UUID{f.ID}) {
		t.Errorf("flow start: %v", ids)
	}
}

func float64Nan() float64 { var z float64; return z / z }

func manyTexts(n int) map[string]any {
	out := map[string]any{}
	for i := 0; i < n; i++ {
		out[fmt.Sprintf("t%d", i)] = strings.Repeat("x", 2000)
	}
	return out
}

func TestRunsListQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.declare("customer", store.AttributeKeyword)
	e.declare("tags", store.AttributeKeyword)
	e.declare("amount", store.AttributeInt)
	e.declare("vip", store.AttributeBool)
	e.declare("due", store.AttributeTime)
	a := e.create(store.RunsCreateParams{Type: "A", Attributes: map[string]any{"customer": "42", "amount": 10, "tags": []string{"red", "blue"}}})
	b := e.create(store.RunsCreateParams{Type: "B", Attributes: map[string]any{"customer": "42", "amount": 20, "vip": true}})
	c := e.create(store.RunsCreateParams{Type: "A", Attributes: map[string]any{"customer": "7", "due": time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}})
	d := e.create(store.RunsCreateParams{Type: "A"})
	if _, err := e.s.RunsCancel(e.ctx, "ns", b.ID); err != nil {
		t.Fatal(err)
	}
	// Another namespace's run with the same values is never found.
	other := store.RunsCreateParams{Namespace: "other", Queue: "q", Type: "A"}
	if err := e.s.AttributesDeclare(e.ctx, "other", "customer", store.AttributeKeyword); err != nil {
		t.Fatal(err)
	}
	other.Attributes = map[string]any{"customer": "42"}
	if _, _, err := e.s.RunsCreate(e.ctx, other); err != nil {
		t.Fatal(err)
	}
	ids := func(rs ...store.Run) []uuid.UUID {
		out := []uuid.UUID{}
		for i := len(rs) - 1; i >= 0; i-- { // newest first
			out = append(out, rs[i].ID)
		}
		return out
	}
	for q, want := range map[string][]uuid.UUID{
		``:                ids(a, b, c, d),
		`customer = '42'`: ids(a, b),
		`customer = "42" AND status = 'cancelled'`:     ids(b),
		`customer != '42'`:                             ids(c),
		`NOT customer = '42'`:                          ids(c, d),
		`customer IS NULL`:                             ids(d),
		`customer IS NOT NULL AND type = 'A'`:          ids(a, c),
		`amount >= 15 OR tags = 'blue'`:                ids(a, b),
		`tags IN ('green', 'red')`:                     ids(a),
		`customer STARTS_WITH '4'`:                     ids(a, b),
		`vip = true`:                                   ids(b),
		`due < '2025-06-01T00:00:00Z'`:                 ids(c),
		`external_id IS NULL AND NOT (type = 'B')`:     ids(a, c, d),
		`finished_at IS NOT NULL`:                      ids(b),
		`NOT finished_at > '2000-01-01T00:00:00Z'`:     ids(a, c, d),
		`status IN ('PENDING') AND amount IN (10, 20)`: ids(a),
	} {
		if got := e.query(q); !slices.Equal(got, want) {
			t.Errorf("%s: got %v, want %v", q, got, want)
		}
	}
	for q, want := range map[string]string{
		`nope = 1`:       `unknown field "nope" (fields: amount, attempts`,
		`amount = 'abc'`: "'abc' is not a int value",
		`due > 'soon'`:   "not an RFC 3339 time",
		`customer = `:    "at 11: expected a value",
	} {
		_, _, err := e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns", Query: q})
		if !errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", q, err, want)
		}
	}
	// A listing by one value walks that value's rows, the cursor too; a
	// value repeated in a list is held once.
	dup := e.create(store.RunsCreateParams{Type: "A", Attributes: map[string]any{"tags": []string{"red", "red"}}})
	if got, err := e.s.RunAttributes(e.ctx, "ns", dup.ID); err != nil || fmt.Sprint(got["tags"]) != "red" {
		t.Errorf("a repeated list value: %v %v", got, err)
	}
	var paged []uuid.UUID
	var after *store.Cursor
	for {
		runs, next, err := e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns", Query: `tags = 'red' AND type = 'A'`, Limit: 1, After: after})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			paged = append(paged, r.ID)
		}
		if after = next; next == nil {
			break
		}
	}
	if !slices.Equal(paged, ids(a, dup)) {
		t.Errorf("tags = 'red' by pages of 1: %v, want %v", paged, ids(a, dup))
	}
	if _, err := e.pool.Exec(e.ctx, `DELETE FROM kagzi.workflow_runs WHERE run_id = $1`, dup.ID); err != nil {
		t.Fatal(err)
	}
	// The query pages with the cursor, ANDed with the other filters.
	runs, next, err := e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns", Query: `customer IS NOT NULL`, Type: "A", Limit: 1})
	if err != nil || len(runs) != 1 || runs[0].ID != c.ID || next == nil {
		t.Fatalf("page 1: %v %v %v", runs, next, err)
	}
	runs, next, err = e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns", Query: `customer IS NOT NULL`, Type: "A", Limit: 1, After: next})
	if err != nil || len(runs) != 1 || runs[0].ID != a.ID {
		t.Fatalf("page 2: %v %v %v", runs, next, err)
	}

	total, groups, err := e.s.RunsCountQuery(e.ctx, "ns", `type = 'A'`, "")
	if err != nil || total != 3 || groups != nil {
		t.Errorf("count: %d %v %v", total, groups, err)
	}
	total, groups, err = e.s.RunsCountQuery(e.ctx, "ns", "", "customer")
	if err != nil || total != 3 || fmtGroups(groups) != "42=2 7=1" {
		t.Errorf("count by customer: %d %s %v", total, fmtGroups(groups), err)
	}
	_, groups, err = e.s.RunsCountQuery(e.ctx, "ns", "customer = '42'", "status")
	if err != nil || fmtGroups(groups) != "CANCELLED=1 PENDING=1" {
		t.Errorf("count by status: %s %v", fmtGroups(groups), err)
	}
	if _, _, err := e.s.RunsCountQuery(e.ctx, "ns", "", "nope"); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("group by an unknown field: %v", err)
	}
}

func fmtGroups(gs []store.CountGroup) string {
	var parts []string
	for _, g := range gs {
		v := "<none>"
		if g.Value != nil {
			v = *g.Value
		}
		parts = append(parts, fmt.Sprintf("%s=%d", v, g.Count))
	}
	return strings.Join(parts, " ")
}

// FuzzQueryValuesAreData: values full of SQL's metacharacters, through
// the real database, are compared as data: the query runs without an
// error and finds exactly the run that holds the value.
func FuzzQueryValuesAreData(f *testing.F) {
	for _, s := range []string{`'; DROP TABLE kagzi.workflow_runs; --`, `" OR 1=1 --`, `\'`, `$1`, `@q1`, `%_`, `*/ TRUE OR /*`, `a''b`} {
		f.Add(s)
	}
	pool, _ := testdb.Pool(f)
	s := store.New(pool, store.Options{})
	n := 0
	f.Fuzz(func(t *testing.T, v string) {
		if v == "" || len(v) > 256 || strings.IndexByte(v, 0) >= 0 || !utf8.ValidString(v) {
			return
		}
		n++
		ns := fmt.Sprintf("fz%d", n)
		ctx := t.Context()
		if err := s.AttributesDeclare(ctx, ns, "customer", store.AttributeKeyword); err != nil {
			t.Fatal(err)
		}
		var want uuid.UUID
		for _, c := range []string{v, v + "x"} {
			r, _, err := s.RunsCreate(ctx, store.RunsCreateParams{Namespace: ns, Queue: "q", Type: "T", Attributes: map[string]any{"customer": c}})
			if err != nil {
				t.Fatal(err)
			}
			if c == v {
				want = r.ID
			}
		}
		lit := "'" + strings.ReplaceAll(v, "'", "''") + "'"
		q := "customer = " + lit + " AND type != " + lit + " OR customer IN (" + lit + ") AND customer STARTS_WITH " + lit + " AND NOT customer = '" + strings.ReplaceAll(v+"x", "'", "''") + "'"
		runs, _, err := s.RunsList(ctx, store.RunsListParams{Namespace: ns, Query: q})
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if len(runs) != 1 || runs[0].ID != want {
			t.Fatalf("%q: got %d runs, want only %s", v, len(runs), want)
		}
		if total, _, err := s.RunsCountQuery(ctx, ns, q, "customer"); err != nil || total != 1 {
			t.Fatalf("%q: count %d %v", v, total, err)
		}
	})
}

// Retention deletes a finished run's attribute rows with it (the cascade),
// and keeps a live run's.
func TestRetentionDeletesAttributes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.declare("customer", store.AttributeKeyword)
	done := e.finished(store.RunsCreateParams{Attributes: map[string]any{"customer": []string{"1", "2"}}}, store.StatusCompleted, 1)
	live := e.create(store.RunsCreateParams{Attributes: map[string]any{"customer": "1"}})
	if n := e.expire(e.dbNow().Add(8*day), 100); n != 1 {
		t.Fatalf("deleted %d runs, want 1", n)
	}
	if got, err := e.s.RunAttributes(e.ctx, "ns", done.ID); err != nil || len(got) != 0 {
		t.Errorf("deleted run's attributes: %v %v", got, err)
	}
	if got := e.query(`customer = '1'`); !slices.Equal(got, []uuid.UUID{live.ID}) {
		t.Errorf("after retention: %v", got)
	}
	if total, _, err := e.s.RunsCountQuery(e.ctx, "ns", "", "customer"); err != nil || total != 1 {
		t.Errorf("count after retention: %d %v", total, err)
	}
}

// A run continued as new and a fork keep the search attributes of the run
// they came from, stamped with their own creation time.
func TestAttributesCarried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.declare("customer", store.AttributeKeyword)
	e.declare("amount", store.AttributeInt)
	r := e.create(store.RunsCreateParams{Type: "C", Attributes: map[string]any{"customer": []string{"1", "2"}, "amount": 3}})
	c := e.claimIn("ns", "q", "C", r.ID)
	next := uuid.Must(uuid.NewV7())
	if _, err := e.s.RunsContinueAsNew(e.ctx, leaseOf(c), next, []byte(`null`), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := e.s.RunAttributes(e.ctx, "ns", next); err != nil || fmt.Sprint(got) != "map[amount:3 customer:[1 2]]" {
		t.Fatalf("continued run's attributes: %v %v", got, err)
	}
	if got := e.query(`amount = 3 AND customer = '2'`); !slices.Equal(got, []uuid.UUID{next, r.ID}) {
		t.Errorf("after continue-as-new: %v", got)
	}
	f, err := e.s.RunsFork(e.ctx, store.RunsForkParams{Namespace: "ns", RunID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.s.RunAttributes(e.ctx, "ns", f.Run.ID); err != nil || fmt.Sprint(got) != "map[amount:3 customer:[1 2]]" {
		t.Fatalf("fork's attributes: %v %v", got, err)
	}
}

// A schedule's attributes are checked when it is created and given to each
// run it fires, backfills or is triggered to start; the template itself is
// not listed.
func TestAttributesOfSchedules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.declare("customer", store.AttributeKeyword)
	if _, err := e.s.SchedulesCreate(e.ctx, store.SchedulesCreateParams{Namespace: "ns", Queue: "q", Type: "Report", Cron: "@hourly",
		Attributes: map[string]any{"nope": 1}}); !errors.Is(err, store.ErrAttribute) {
		t.Fatalf("undeclared: %v", err)
	}
	sc := createSchedule(t, e.s, store.SchedulesCreateParams{Cron: "0 * * * *", Attributes: map[string]any{"customer": "9"}})
	next := sc.NextFireAt.Add(time.Hour)
	run, fired, err := e.s.SchedulesFire(e.ctx, store.SchedulesFireParams{Namespace: "ns", ScheduleID: sc.ID, FireAt: *sc.NextFireAt, Next: &next})
	if err != nil || !fired {
		t.Fatalf("fire: %v %v", fired, err)
	}
	bf, err := e.s.SchedulesBackfill(e.ctx, store.SchedulesBackfillParams{Namespace: "ns", ScheduleID: sc.ID, From: t0.Add(-2 * time.Hour), To: t0.Add(-time.Hour), Now: t0})
	if err != nil || len(bf.Runs) != 1 {
		t.Fatalf("backfill: %+v %v", bf, err)
	}
	trig, err := e.s.SchedulesTrigger(e.ctx, "ns", sc.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := e.query(`customer = '9'`)
	if len(got) != 3 || !slices.Contains(got, run.ID) || !slices.Contains(got, bf.Runs[0].ID) || !slices.Contains(got, trig.ID) {
		t.Errorf("fired runs by attribute: %v, want %s, %s and %s", got, run.ID, bf.Runs[0].ID, trig.ID)
	}
	// The template's own value is no run's, folded or not.
	for _, fold := range []bool{false, true} {
		if fold {
			e.fold()
		}
		if total, groups, err := e.s.RunsCountQuery(e.ctx, "ns", "", "customer"); err != nil || total != 3 || fmtGroups(groups) != "9=3" {
			t.Errorf("count by customer (folded %v): %d %s %v", fold, total, fmtGroups(groups), err)
		}
	}
}

// fold folds every attribute count delta.
func (e *env) fold() {
	e.t.Helper()
	for {
		n, err := e.s.AttributeCountsFold(e.ctx, 2)
		if err != nil {
			e.t.Fatal(err)
		}
		if n < 2 {
			return
		}
	}
}

// A count of every run by an attribute reads the maintained counts: it
// agrees with the same count by a query, before and after the deltas are
// folded, through starts, keyword lists, deletions
// and another namespace's runs; a value no run holds any more leaves no
// row.
func TestAttributeCountsMaintained(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.declare("customer", store.AttributeKeyword)
	e.declare("tags", store.AttributeKeyword)
	e.declare("due", store.AttributeTime)
	due := time.Date(2025, 1, 2, 3, 4, 5, 600000000, time.UTC)
	a := e.create(store.RunsCreateParams{Attributes: map[string]any{"customer": "42", "tags": []string{"red", "blue"}, "due": due}})
	e.create(store.RunsCreateParams{Attributes: map[string]any{"customer": "42", "tags": []string{"red"}}})
	c := e.create(store.RunsCreateParams{Attributes: map[string]any{"customer": "7"}})
	e.create(store.RunsCreateParams{})
	if err := e.s.AttributesDeclare(e.ctx, "other", "customer", store.AttributeKeyword); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.s.RunsCreate(e.ctx, store.RunsCreateParams{Namespace: "other", Queue: "q", Type: "T", Attributes: map[string]any{"customer": "42"}}); err != nil {
		t.Fatal(err)
	}
	check := func(when string, want map[string]string) {
		t.Helper()
		for name, w := range want {
			_, maintained, err := e.s.RunsCountQuery(e.ctx, "ns", "", name)
			if err != nil || fmtGroups(maintained) != w {
				t.Errorf("%s: count by %s: %s %v, want %s", when, name, fmtGroups(maintained), err, w)
			}
			_, queried, err := e.s.RunsCountQuery(e.ctx, "ns", "type = 'T'", name)
			if err != nil || fmtGroups(queried) != w {
				t.Errorf("%s: count by %s with a query: %s %v, want %s", when, name, fmtGroups(queried), err, w)
			}
		}
	}
	want := map[string]string{"customer": "42=2 7=1", "tags": "red=2 blue=1", "due": "2025-01-02T03:04:05.600000Z=1"}
	check("started", want)
	e.fold()
	check("folded", want)
	// Deleting a run takes its attribute rows along (as retention does).
	for _, id := range []uuid.UUID{a.ID, c.ID} {
		if _, err := e.pool.Exec(e.ctx, `DELETE FROM kagzi.workflow_runs WHERE run_id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	want = map[string]string{"customer": "42=1", "tags": "red=1", "due": ""}
	check("deleted", want)
	e.fold()
	check("deleted and folded", want)
	var rows int
	if err := e.pool.QueryRow(e.ctx, `SELECT count(*) FROM kagzi.attribute_counts WHERE namespace_id = 'ns' AND value IN ('7', 'blue')`).Scan(&rows); err != nil || rows != 0 {
		t.Errorf("%d count rows of values no run holds (%v), want none", rows, err)
	}
	if _, err := e.s.AttributeCountsFold(e.ctx, store.MaxAttributeCountsFold+1); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("fold of too many: %v", err)
	}
}

// A count that outlives its statement timeout stops with ErrQueryTimeout
// instead of holding its caller. Not parallel: it shortens the timeout of
// every query.
func TestQueryTimeout(t *testing.T) {
	e := newEnv(t)
	if _, err := e.s.RunsInsertFinished(e.ctx, store.RunsInsertFinishedParams{Namespace: "ns", Queue: "q", Type: "T", Count: 200000, Before: time.Now()}); err != nil {
		t.Fatal(err)
	}
	defer store.SetQueryTimeout(time.Millisecond)()
	_, _, err := e.s.RunsCountQuery(e.ctx, "ns", "error IS NULL OR attempts > 0", "version")
	if !errors.Is(err, store.ErrQueryTimeout) || !strings.Contains(err.Error(), "narrow the query") {
		t.Fatalf("a count of 200,000 runs in 1ms: %v", err)
	}
	if _, _, err := e.s.RunsList(e.ctx, store.RunsListParams{Namespace: "ns", Query: "error STARTS_WITH 'nothing'"}); !errors.Is(err, store.ErrQueryTimeout) {
		t.Fatalf("a listing that scans 200,000 runs in 1ms: %v", err)
	}
}

// Many starts with attributes read the declared kinds once per call, not
// once per run.
func TestRunsCreateManyReadsKindsOnce(t *testing.T) {
	t.Parallel()
	tally := stmtcount.NewTally()
	pool, err := store.ConnectTraced(t.Context(), testdb.New(t), tally)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := store.New(pool, store.Options{})
	if err := s.AttributesDeclare(t.Context(), "ns", "customer", store.AttributeKeyword); err != nil {
		t.Fatal(err)
	}
	ps := make([]store.RunsCreateParams, 20)
	for i := range ps {
		ps[i] = store.RunsCreateParams{Namespace: "ns", Queue: "q", Type: "T", Attributes: map[string]any{"customer": fmt.Sprint(i % 3)}}
	}
	before := tally.Snapshot()
	if _, err := s.RunsCreateMany(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	reads := int64(0)
	for sql, n := range tally.Snapshot() {
		if strings.Contains(sql, "FROM kagzi.search_attributes") {
			reads += n - before[sql]
		}
	}
	if reads != 1 {
		t.Fatalf("%d reads of the declared kinds for 20 starts, want 1", reads)
	}
}
