package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
	"github.com/kagzi/kagzi/pkg/store"
)

// The client's input validation is fuzzed through the public API, without
// Postgres: the store runs over recordDB, which records every statement's
// arguments and fails it with errReached. So each call either is rejected
// before the database, with store.ErrInvalidArgument or
// store.ErrPayloadTooLarge, for a reason the spec written here also finds,
// or reaches the database with arguments the spec accepts and Postgres can
// hold (pgx turns some values it cannot hold into untyped errors and wraps
// others silently into different values).

// errReached fails every statement: a call that returns it passed all
// validation.
var errReached = errors.New("reached the database")

// recordDB is a store.DBTX that records and fails every statement.
type recordDB struct{ stmts []stmt }

// stmt is a recorded statement. values are the arguments as Postgres gets
// them, in placeholder order: a statement with named arguments is
// rewritten by pgx's own rewriter, so a value given under a name the text
// does not use is not among them. named holds the arguments by name (nil
// for a statement with positional arguments). err is set when the names
// given and the names the text uses differ: a misspelled name would
// otherwise reach Postgres as NULL.
type stmt struct {
	sql    string
	values []any
	named  pgx.NamedArgs
	err    error
}

func (d *recordDB) record(sql string, args []any) {
	st := stmt{sql: sql, values: args}
	if na, ok := store.NamedArgsOf(args); ok {
		st.named = na
		_, st.values, st.err = pgx.StrictNamedArgs(na).RewriteQuery(context.Background(), nil, sql, nil)
	}
	d.stmts = append(d.stmts, st)
}

// arg returns the argument named name of the statement, failing t when
// the statement has no such argument.
func (st stmt) arg(t *testing.T, name string) any {
	t.Helper()
	v, ok := st.named[name]
	if !ok {
		t.Fatalf("statement has no argument %q: %s", name, st.sql)
	}
	return v
}

// with returns the first recorded statement that has an argument named
// name (a statement can travel with planner settings around it), failing
// t when none has.
func (d *recordDB) with(t *testing.T, name string) stmt {
	t.Helper()
	for _, st := range d.stmts {
		if _, ok := st.named[name]; ok {
			return st
		}
	}
	t.Fatalf("no statement has an argument %q (%d recorded)", name, len(d.stmts))
	return stmt{}
}

func (d *recordDB) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	d.record(sql, args)
	return pgconn.CommandTag{}, errReached
}

func (d *recordDB) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	d.record(sql, args)
	return nil, errReached
}

func (d *recordDB) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	if strings.Contains(sql, "FROM kagzi.settings") {
		// The database's payload limits, read once before the first check.
		return settingsRow{}
	}
	d.record(sql, args)
	return errRow{}
}

// settingsRow is the settings row of the fuzzed database.
type settingsRow struct{}

func (settingsRow) Scan(dest ...any) error {
	*dest[0].(*int), *dest[1].(*int) = fuzzWarnBytes, fuzzMaxBytes
	return nil
}

func (d *recordDB) SendBatch(_ context.Context, b *pgx.Batch) pgx.BatchResults {
	for _, q := range b.QueuedQueries {
		d.record(q.SQL, q.Arguments)
	}
	return errBatch{}
}

func (d *recordDB) Begin(context.Context) (pgx.Tx, error) { return &recordTx{db: d}, nil }

type errRow struct{}

func (errRow) Scan(...any) error { return errReached }

// errBatch fails every result; what the store never calls is left to the
// nil embedded interface.
type errBatch struct{ pgx.BatchResults }

func (errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, errReached }
func (errBatch) Query() (pgx.Rows, error)         { return nil, errReached }
func (errBatch) QueryRow() pgx.Row                { return errRow{} }
func (errBatch) Close() error                     { return errReached }

// recordTx records like recordDB. The methods the store never calls are
// left to the nil embedded interface, so a call to one fails the test.
type recordTx struct {
	pgx.Tx
	db *recordDB
}

func (x *recordTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return x.db.Exec(ctx, sql, args...)
}

func (x *recordTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return x.db.Query(ctx, sql, args...)
}

func (x *recordTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return x.db.QueryRow(ctx, sql, args...)
}

func (x *recordTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return x.db.SendBatch(ctx, b)
}

func (x *recordTx) Begin(ctx context.Context) (pgx.Tx, error) { return x.db.Begin(ctx) }
func (x *recordTx) Commit(context.Context) error              { return errReached }
func (x *recordTx) Rollback(context.Context) error            { return nil }

// Small payload limits, so the fuzzer crosses them.
const (
	fuzzWarnBytes = 96
	fuzzMaxBytes  = 192
)

// fuzzClient returns a client over a recordDB and the payload sizes the
// store reported as large.
func fuzzClient(t *testing.T, namespace, queue string) (*client.Client, *recordDB, *[]int, error) {
	db := &recordDB{}
	var large []int
	st := store.New(db, store.Options{OnLargePayload: func(_ string, n int) { large = append(large, n) }})
	// A no-op provider keeps the stored trace context what the caller gave.
	cl, err := client.NewFromStore(st, nil, client.Options{Namespace: namespace, Queue: queue, TracerProvider: noop.NewTracerProvider()})
	if cl != nil {
		t.Cleanup(cl.Close)
	}
	return cl, db, &large, err
}

// pgText reports whether Postgres can store s as text.
func pgText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// storeName is the store's documented rule for names it does not need as
// subject tokens (versions, event names): at most 200 bytes of text
// without spaces, '*', '>' or '@'.
func storeName(s string) bool {
	return len(s) <= 200 && pgText(s) && !strings.ContainsAny(s, " \t\r\n*>@")
}

var (
	pgTimeMin = time.Date(-4713, 11, 24, 0, 0, 0, 0, time.UTC)
	pgTimeEnd = time.Date(294277, 1, 1, 0, 0, 0, 0, time.UTC)
)

func pgTime(t time.Time) bool { return !t.Before(pgTimeMin) && t.Before(pgTimeEnd) }

// checkArgs fails t unless every statement's named arguments are the
// names its text uses, and every argument of every statement is a value
// Postgres holds as given: text without NUL or invalid UTF-8, times in the
// timestamptz range and Go ints in the range of an integer column (every
// integer column Kagzi writes from an int is one).
func checkArgs(t *testing.T, db *recordDB) {
	t.Helper()
	for i, st := range db.stmts {
		if st.err != nil {
			t.Fatalf("statement %d: %v: %s", i, st.err, st.sql)
		}
		for j, a := range st.values {
			if !pgValue(reflect.ValueOf(a)) {
				t.Fatalf("statement %d argument %d reaches Postgres as %#v, which it cannot hold", i, j+1, a)
			}
		}
	}
}

func pgValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Invalid:
		return true
	case reflect.Pointer:
		return v.IsNil() || pgValue(v.Elem())
	case reflect.String:
		return pgText(v.String())
	case reflect.Int:
		return v.Int() >= math.MinInt32 && v.Int() <= math.MaxInt32
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return true // bytea, or JSON the store encoded
		}
		for i := range v.Len() {
			if !pgValue(v.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Struct:
		if tm, ok := v.Interface().(time.Time); ok {
			return pgTime(tm)
		}
	}
	return true
}

// violations are the fields a spec finds invalid.
type violations []string

func (v *violations) check(ok bool, field string) {
	if !ok {
		*v = append(*v, field)
	}
}

// checkRunShape checks what every call that makes runs takes: a workflow
// type, an optional queue and an optional version.
func (v *violations) checkRunShape(typ, queue, version string) {
	v.check(protocol.ValidToken("type", typ) == nil, "type")
	v.check(queue == "" || protocol.ValidToken("queue", queue) == nil, "queue")
	v.check(storeName(version), "version")
}

// outcome checks err against the spec's reasons to reject: invalid lists
// what is malformed, tooLarge says a payload is above the limit. It
// reports whether the call reached the database.
func outcome(t *testing.T, err error, invalid violations, tooLarge bool) bool {
	t.Helper()
	switch {
	case errors.Is(err, errReached):
		if len(invalid) > 0 || tooLarge {
			t.Fatalf("accepted although %v (payload too large: %v)", invalid, tooLarge)
		}
		return true
	case errors.Is(err, store.ErrInvalidArgument):
		if len(invalid) == 0 {
			t.Fatalf("rejected as invalid, but the spec finds nothing wrong: %v", err)
		}
	case errors.Is(err, store.ErrPayloadTooLarge):
		if !tooLarge {
			t.Fatalf("rejected as too large, but the payload fits: %v", err)
		}
	default:
		t.Fatalf("error %v is neither typed nor from the database", err)
	}
	return false
}

// fuzzInput builds a payload argument from fuzz data: mode picks raw JSON,
// a Go string, nil, or a float (which JSON may refuse). want is its
// encoding, nil if it cannot be encoded.
func fuzzInput(data []byte, mode uint8) (input any, want []byte) {
	switch mode % 4 {
	case 0:
		if json.Valid(data) {
			want = data
		}
		return json.RawMessage(data), want
	case 1:
		want, _ = json.Marshal(string(data))
		return string(data), want
	case 2:
		return nil, []byte("null")
	default:
		var bits uint64
		for _, b := range data {
			bits = bits<<8 | uint64(b)
		}
		x := math.Float64frombits(bits)
		want, _ = json.Marshal(x)
		return x, want
	}
}

// checkPayload checks what the store was given for a payload: the exact
// encoding (the first statement's argument name, a run's input or, for
// many runs, their inputs), reported as large above the warning size.
func checkPayload(t *testing.T, db *recordDB, name string, want []byte, large []int) {
	t.Helper()
	last := db.with(t, name).arg(t, name)
	var got []byte
	switch v := last.(type) {
	case []byte:
		got = v
	case [][]byte:
		got = v[0]
	default:
		t.Fatalf("the payload argument is %T", last)
	}
	if string(got) != string(want) {
		t.Fatalf("payload stored as %q, want %q", got, want)
	}
	if (len(want) > fuzzWarnBytes) != (len(large) == 1 && large[0] == len(want)) {
		t.Fatalf("payload of %d bytes reported large as %v", len(want), large)
	}
}

// traceParent is a W3C traceparent as this client writes one: version 00,
// non-zero ids, sampled or not.
var traceParent = regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$`)

func canonicalTraceParent(s string) bool {
	return traceParent.MatchString(s) && s[3:35] != strings.Repeat("0", 32) && s[36:52] != strings.Repeat("0", 16)
}

// hasArg reports whether some argument of a statement is s, as text.
func hasArg(db *recordDB, s string) bool {
	for _, st := range db.stmts {
		for _, a := range st.values {
			switch v := a.(type) {
			case string:
				if v == s {
					return true
				}
			case *string:
				if v != nil && *v == s {
					return true
				}
			case []*string:
				for _, p := range v {
					if p != nil && *p == s {
						return true
					}
				}
			}
		}
	}
	return false
}

// timeArgs returns the non-nil times the statements were given.
func timeArgs(db *recordDB) []time.Time {
	var out []time.Time
	for _, st := range db.stmts {
		for _, a := range st.values {
			switch v := a.(type) {
			case *time.Time:
				if v != nil {
					out = append(out, *v)
				}
			case []*time.Time:
				for _, p := range v {
					if p != nil {
						out = append(out, *p)
					}
				}
			}
		}
	}
	return out
}

// fuzzPolicy is nil when every field is zero, else the policy.
func fuzzPolicy(attempts int, initial int64, coef, jitter float64) *retry.Policy {
	if attempts == 0 && initial == 0 && coef == 0 && jitter == 0 {
		return nil
	}
	return &retry.Policy{MaxAttempts: attempts, InitialInterval: time.Duration(initial), BackoffCoefficient: coef, Jitter: jitter}
}

// fuzzUnix is the time sec seconds after 1970 (negative: before), or the
// zero time, which means unset, for 0.
func fuzzUnix(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0)
}

func FuzzStart(f *testing.F) {
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	type seed struct {
		typ, queue, version, externalID, traceParent string
		input                                        []byte
		mode                                         uint8
		priority, deadline, startAt                  int64
		attempts                                     int
		initial                                      int64
		coef, jitter                                 float64
	}
	for _, s := range []seed{
		{typ: "ProcessOrder", input: []byte(`{"order_id": 42}`)},
		{typ: "ProcessOrder", queue: "orders", version: "v2", externalID: "order-42", traceParent: tp,
			input: []byte(`[1, "<&>\u2028"]`), priority: 10, deadline: 1893456000, startAt: 1800000000,
			attempts: 3, initial: int64(time.Second), coef: 2, jitter: 0.1},
		{typ: "T", input: []byte("hello"), mode: 1, externalID: strings.Repeat("e", 200), version: strings.Repeat("v", 200)},
		{typ: "T", mode: 2, traceParent: "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"},
		{typ: "T", input: []byte{0x7f, 0xf8, 0, 0, 0, 0, 0, 1}, mode: 3},
		{typ: "T", input: []byte{0x3f, 0xf0, 0, 0, 0, 0, 0, 0}, mode: 3},
		{typ: "T", input: []byte(strings.Repeat("x", fuzzMaxBytes)), mode: 1},
		{typ: "T", input: []byte(`"` + strings.Repeat("x", fuzzMaxBytes-2) + `"`)},
		{typ: "T", input: []byte(`"` + strings.Repeat("x", fuzzWarnBytes) + `"`)},
		{typ: "", input: []byte("null")},
		{typ: "a.b", input: []byte("null")},
		{typ: "a b", input: []byte("null")},
		{typ: "T", queue: "q>", input: []byte("null")},
		{typ: "T", input: []byte("{")},
		{typ: "T", input: nil},
		{typ: "T", input: []byte("null"), version: "v 1"},
		{typ: "T", input: []byte("null"), version: "v\xff"},
		{typ: "T", input: []byte("null"), externalID: "order\x00"},
		{typ: "T", input: []byte("null"), externalID: strings.Repeat("e", 201)},
		{typ: "T", input: []byte("null"), traceParent: "not a traceparent"},
		{typ: "T", input: []byte("null"), traceParent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		{typ: "T", input: []byte("null"), priority: math.MaxInt32},
		{typ: "T", input: []byte("null"), priority: math.MaxInt32 + 1},
		{typ: "T", input: []byte("null"), priority: math.MinInt64},
		{typ: "T", input: []byte("null"), deadline: math.MaxInt64 / 2},
		{typ: "T", input: []byte("null"), startAt: -1 << 40},
		{typ: "T", input: []byte("null"), attempts: -1, initial: 500 * int64(time.Microsecond)},
		{typ: "T", input: []byte("null"), initial: -1},
		{typ: "T", input: []byte("null"), coef: 0.5},
		{typ: "T", input: []byte("null"), jitter: math.Inf(-1)},
	} {
		f.Add(s.typ, s.queue, s.version, s.externalID, s.traceParent, s.input, s.mode, s.priority, s.deadline, s.startAt,
			s.attempts, s.initial, s.coef, s.jitter)
	}
	f.Fuzz(func(t *testing.T, typ, queue, version, externalID, traceParentArg string, data []byte, mode uint8,
		priority, deadline, startAt int64, attempts int, initial int64, coef, jitter float64) {
		input, want := fuzzInput(data, mode)
		opts := client.StartOptions{Queue: queue, Version: version, ExternalID: externalID, TraceParent: traceParentArg,
			Priority: int(priority), Deadline: fuzzUnix(deadline), StartAt: fuzzUnix(startAt),
			RetryPolicy: fuzzPolicy(attempts, initial, coef, jitter)}

		var invalid violations
		bad := invalid.check
		invalid.checkRunShape(typ, queue, version)
		bad(len(externalID) <= 200 && pgText(externalID), "external id")
		bad(want != nil, "input")
		bad(priority >= math.MinInt32 && priority <= math.MaxInt32, "priority")
		bad(opts.Deadline.IsZero() || pgTime(opts.Deadline), "deadline")
		bad(opts.StartAt.IsZero() || pgTime(opts.StartAt), "start time")
		bad(opts.RetryPolicy == nil || opts.RetryPolicy.Validate() == nil, "retry policy")
		tooLarge := len(want) > fuzzMaxBytes

		ctx := context.Background()
		cl, db, large, err := fuzzClient(t, "", "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.Start(ctx, typ, input, opts)
		reached := outcome(t, err, invalid, tooLarge)
		if reached {
			checkArgs(t, db)
			checkPayload(t, db, "inputs", want, *large)
			// Only a well-formed traceparent is stored.
			other := false
			for _, s := range []string{typ, queue, version, externalID, "default"} {
				other = other || s == traceParentArg
			}
			if traceParentArg != "" && !other && hasArg(db, traceParentArg) != canonicalTraceParent(traceParentArg) {
				t.Fatalf("traceparent %q stored: %v", traceParentArg, hasArg(db, traceParentArg))
			}
			times := timeArgs(db)
			for _, set := range []time.Time{opts.Deadline, opts.StartAt} {
				found := false
				for _, tm := range times {
					found = found || tm.Equal(set)
				}
				if !set.IsZero() && !found {
					t.Fatalf("time %v not given to the database (%v)", set, times)
				}
			}
			if opts.RetryPolicy != nil {
				checkStoredPolicy(t, db.with(t, "retry_policies"), "retry_policies", *opts.RetryPolicy)
			}
		}

		// StartMany validates each request as Start does.
		cl2, db2, large2, err := fuzzClient(t, "", "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl2.StartMany(ctx, []client.StartRequest{{Type: typ, Input: input, Options: opts}})
		if outcome(t, err, invalid, tooLarge) != reached {
			t.Fatalf("Start reached the database: %v, StartMany: %v", reached, err)
		}
		if reached {
			checkArgs(t, db2)
			checkPayload(t, db2, "inputs", want, *large2)
			if opts.RetryPolicy != nil {
				checkStoredPolicy(t, db2.with(t, "retry_policies"), "retry_policies", *opts.RetryPolicy)
			}
		}
	})
}

// checkStoredPolicy finds the policy in the statement's argument name (a
// run's policy or, for many runs, their policies: JSON) and checks a worker
// reads back the policy the caller set.
func checkStoredPolicy(t *testing.T, st stmt, name string, p retry.Policy) {
	t.Helper()
	var b []byte
	switch v := st.arg(t, name).(type) {
	case []byte:
		b = v
	case []*string:
		if len(v) != 1 || v[0] == nil {
			t.Fatalf("policies %v, want one", v)
		}
		b = []byte(*v[0])
	default:
		t.Fatalf("the policy argument is %T", v)
	}
	var got retry.Policy
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("stored policy %s: %v", b, err)
	}
	if got, want := got.WithDefaults(), p.WithDefaults(); !reflect.DeepEqual(got, want) {
		t.Fatalf("policy %+v stored as %s, read back as %+v", want, b, got)
	}
}

func FuzzCreateSchedule(f *testing.F) {
	type seed struct {
		typ, queue, version, cron, tz string
		input                         []byte
		mode                          uint8
		maxCatchup, attempts          int
		initial                       int64
	}
	for _, s := range []seed{
		{typ: "Cleanup", cron: "0 3 * * *", tz: "Europe/Paris", version: "v2", maxCatchup: 2, input: []byte(`{"days": 30}`),
			attempts: 4},
		{typ: "Report", cron: "0 9 * * MON-FRI", tz: "America/New_York", queue: "reports", mode: 2},
		{typ: "T", cron: "@daily", maxCatchup: store.MaxCatchupLimit, mode: 1, input: []byte("x")},
		{typ: "T", cron: "*/10 * * * * *", tz: "UTC", input: []byte("null")},
		{typ: "T", cron: "  */15 * * * *\t", input: []byte("null")},
		{typ: "T", cron: "0 0 1 1 * 2099", input: []byte("null")},
		{typ: "T", cron: "0 0 1 1 * 2000", input: []byte("null")},
		{typ: "T", cron: "0 0 30 2 *", input: []byte("null")},
		{typ: "T", cron: "", input: []byte("null")},
		{typ: "T", cron: "61 * * * *", input: []byte("null")},
		{typ: "T", cron: "* * * *", input: []byte("null")},
		{typ: "T", cron: "@every 1h", input: []byte("null")},
		{typ: "T", cron: "* * * * *", tz: "Local", input: []byte("null")},
		{typ: "T", cron: "* * * * *", tz: "Mars/Olympus", input: []byte("null")},
		{typ: "T", cron: "* * * * *", maxCatchup: -1, input: []byte("null")},
		{typ: "T", cron: "* * * * *", maxCatchup: store.MaxCatchupLimit + 1, input: []byte("null")},
		{typ: "T.x", cron: "* * * * *", input: []byte("null")},
		{typ: "T", queue: "a@b", cron: "* * * * *", input: []byte("null")},
		{typ: "T", version: "v\x00", cron: "* * * * *", input: []byte("null")},
		{typ: "T", cron: "* * * * *", input: []byte(strings.Repeat("7", fuzzMaxBytes+1))},
		{typ: "T", cron: "* * * * *", input: []byte("nul")},
		{typ: "T", cron: "* * * * *", input: []byte("null"), initial: -5},
	} {
		f.Add(s.typ, s.queue, s.version, s.cron, s.tz, s.input, s.mode, s.maxCatchup, s.attempts, s.initial)
	}
	f.Fuzz(func(t *testing.T, typ, queue, version, cron, tz string, data []byte, mode uint8, maxCatchup, attempts int, initial int64) {
		input, want := fuzzInput(data, mode)
		o := client.ScheduleOptions{Cron: cron, Timezone: tz, Queue: queue, Version: version, MaxCatchup: maxCatchup,
			RetryPolicy: fuzzPolicy(attempts, initial, 0, 0)}
		cl, db, large, err := fuzzClient(t, "", "")
		if err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		_, err = cl.CreateSchedule(context.Background(), typ, input, o)
		after := time.Now()

		trimmed := strings.TrimSpace(cron)
		var invalid violations
		bad := invalid.check
		invalid.checkRunShape(typ, queue, version)
		bad(want != nil, "input")
		bad(maxCatchup >= 0 && maxCatchup <= store.MaxCatchupLimit, "max catch-up")
		bad(o.RetryPolicy == nil || o.RetryPolicy.Validate() == nil, "retry policy")
		bad(store.ParseCron(trimmed) == nil, "cron")
		_, zerr := time.LoadLocation(tz)
		bad(tz != "Local" && zerr == nil, "timezone")
		firstAfter, nerr := store.NextFireTime(trimmed, tz, after)
		bad(nerr == nil && firstAfter != nil, "no fire time")

		if !outcome(t, err, invalid, len(want) > fuzzMaxBytes) {
			return
		}
		checkArgs(t, db)
		checkPayload(t, db, "input", want, *large)
		if o.RetryPolicy != nil {
			checkStoredPolicy(t, db.with(t, "retry_policy"), "retry_policy", *o.RetryPolicy)
		}
		if !hasArg(db, trimmed) {
			t.Fatalf("cron %q not stored trimmed as %q", cron, trimmed)
		}
		zone := tz
		if zone == "" {
			zone = "UTC"
		}
		if !hasArg(db, zone) {
			t.Fatalf("zone %q not stored as %q", tz, zone)
		}
		// The first fire time is the expression's first after the call
		// began, at most its first after the call ended.
		firstBefore, _ := store.NextFireTime(trimmed, tz, before)
		times := timeArgs(db)
		if len(times) != 1 || firstBefore == nil || times[0].Before(*firstBefore) || times[0].After(*firstAfter) {
			t.Fatalf("first fire time %v, expected between %v and %v", times, firstBefore, firstAfter)
		}
	})
}

// eventNameSpec is ValidEventName's documented contract, written
// independently: 1 to 200 bytes of printable UTF-8 without spaces, '*',
// '>' or '@'.
func eventNameSpec(s string) bool {
	if s == "" || len(s) > protocol.MaxNameLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || strings.ContainsRune("*>@", r) {
			return false
		}
	}
	return true
}

func FuzzSendEvent(f *testing.F) {
	for _, c := range []struct {
		runID    string
		external string
		name     string
		data     []byte
		mode     uint8
	}{
		{"0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e", "", "approved", nil, 2},
		{"", "order-42", "payment-received", []byte(`{"amount": 1999}`), 0},
		{"", "order-42", "a.b", []byte("yes"), 1},
		{"", "order-42", "名前", []byte("null"), 0},
		{"", "", "x", nil, 2},
		{"00000000-0000-0000-0000-000000000000", "", "x", nil, 2},
		{"", "order-42", "", nil, 2},
		{"", "order-42", "a b", nil, 2},
		{"", "order-42", "a\u2028b", nil, 2},
		{"", "order-42", "a\u00a0b", nil, 2},
		{"", "order-42", "a\x7fb", nil, 2},
		{"", "order-42", "\xff", nil, 2},
		{"", "order\x00", "x", nil, 2},
		{"", "\xc3", "x", nil, 2},
		{"", strings.Repeat("e", 201), "x", nil, 2},
		{"", "order-42", strings.Repeat("n", 201), nil, 2},
		{"", "order-42", "x", []byte(strings.Repeat("[", 10)), 0},
		{"", "order-42", "x", []byte(strings.Repeat("y", fuzzMaxBytes)), 1},
	} {
		f.Add(c.runID, c.external, c.name, c.data, c.mode)
	}
	f.Fuzz(func(t *testing.T, runID, external, name string, data []byte, mode uint8) {
		input, want := fuzzInput(data, mode)
		cl, db, large, err := fuzzClient(t, "", "")
		if err != nil {
			t.Fatal(err)
		}
		var invalid violations
		bad := invalid.check
		// The store's own name rule (storeName) is implied.
		bad(eventNameSpec(name), "name")
		bad(want != nil, "payload")
		if id, perr := uuid.Parse(runID); perr == nil {
			bad(id != uuid.Nil, "nil run id")
			_, err = cl.SendEvent(context.Background(), id, name, input)
		} else {
			bad(external != "" && len(external) <= 200 && pgText(external), "external id")
			_, err = cl.SendEventByExternalID(context.Background(), external, name, input)
		}
		if outcome(t, err, invalid, len(want) > fuzzMaxBytes) {
			checkArgs(t, db)
			if len(want) > fuzzWarnBytes != (len(*large) == 1) {
				t.Fatalf("payload of %d bytes reported large as %v", len(want), *large)
			}
		}
	})
}

func FuzzListCursor(f *testing.F) {
	id := uuid.MustParse("0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e")
	f.Add("", 0)
	f.Add(store.Cursor{CreatedAt: time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC), ID: id}.String(), 50)
	f.Add(store.Cursor{CreatedAt: time.UnixMicro(math.MinInt64), ID: id}.String(), 1000)
	f.Add(store.Cursor{CreatedAt: time.UnixMicro(math.MaxInt64), ID: id}.String(), 1001)
	f.Add("not a cursor", -1)
	f.Add("MTIzLzAxOTBjNWYyLTdhNGUtN2IxYy05ZDFlLTJmM2E0YjVjNmQ3ZQ", math.MaxInt)
	f.Fuzz(func(t *testing.T, cursor string, limit int) {
		_, perr := store.ParseCursor(cursor)
		var invalid violations
		invalid.check(cursor == "" || perr == nil, "cursor")
		invalid.check(limit <= 1000, "limit")
		for _, list := range []func(*client.Client) error{
			func(cl *client.Client) error {
				_, _, err := cl.List(context.Background(), client.ListOptions{Cursor: cursor, Limit: limit})
				return err
			},
			func(cl *client.Client) error {
				_, _, err := cl.ListSchedules(context.Background(), client.ListSchedulesOptions{Cursor: cursor, Limit: limit})
				return err
			},
		} {
			cl, db, _, err := fuzzClient(t, "", "")
			if err != nil {
				t.Fatal(err)
			}
			if outcome(t, list(cl), invalid, false) {
				checkArgs(t, db)
			}
		}
	})
}

func FuzzConcurrencyLimit(f *testing.F) {
	f.Add("", "", "", "ProcessOrder", 5)
	f.Add("tenant-1", "orders", "payments", "Charge", 0)
	f.Add("ns", "q", "", "T", math.MaxInt32)
	f.Add("ns", "q", "", "T", math.MaxInt32+1)
	f.Add("ns", "q", "", "T", -1)
	f.Add("a.b", "q", "", "T", 1)
	f.Add("ns", "q q", "", "T", 1)
	f.Add("ns", "q", "x>", "T", 1)
	f.Add("ns", "q", "", "", 1)
	f.Add("ns", "q", "", "T\xff", 1)
	f.Add("ns", "q", "", "T\x00", 1)
	f.Fuzz(func(t *testing.T, namespace, defaultQueue, queue, typ string, maxRunning int) {
		cl, db, _, err := fuzzClient(t, namespace, defaultQueue)
		validNew := (namespace == "" || protocol.ValidToken("ns", namespace) == nil) &&
			(defaultQueue == "" || protocol.ValidToken("queue", defaultQueue) == nil)
		if err != nil {
			if !errors.Is(err, store.ErrInvalidArgument) || validNew {
				t.Fatalf("New(%q, %q) = %v", namespace, defaultQueue, err)
			}
			return
		}
		if !validNew {
			t.Fatalf("New accepted namespace %q, queue %q", namespace, defaultQueue)
		}
		if want := namespace; cl.Namespace() != want && (want != "" || cl.Namespace() != "default") {
			t.Fatalf("namespace %q became %q", namespace, cl.Namespace())
		}
		var invalid violations
		invalid.check(!(queue != "" && !storeName(queue) || !storeName(typ) || typ == ""), "name")
		invalid.check(maxRunning >= 0 && maxRunning <= math.MaxInt32, "max")
		if outcome(t, func() error {
			_, err := cl.SetConcurrencyLimit(context.Background(), queue, typ, maxRunning)
			return err
		}(),
			invalid, false) {
			checkArgs(t, db)
		}
	})
}
