package protocol_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// mutation turns a valid message into one Validate must reject.
type mutation[PT any] struct {
	name string
	mut  func(PT)
	// noWire: the violation cannot be expressed in JSON (json.Marshal would
	// fail or repair it), so only Validate and Encode are checked.
	noWire bool
}

// wireEdit turns a valid encoding's generic JSON into one Decode must
// reject, for violations no Go value encodes to (nested unknown fields,
// wrong JSON types).
type wireEdit struct {
	name string
	edit func(obj map[string]any)
}

// msgSuite is the table of one message type.
type msgSuite[T any, PT msgPtr[T]] struct {
	valid    func() PT
	variants map[string]func() PT // more valid values, boundaries included
	bad      []mutation[PT]
	badWire  []wireEdit
}

type suite interface {
	roundTrip(t *testing.T)
	rejectMalformed(t *testing.T)
	rejectInvalidFields(t *testing.T)
}

func (s msgSuite[T, PT]) values() map[string]func() PT {
	vs := map[string]func() PT{"valid": s.valid}
	for k, v := range s.variants {
		vs[k] = v
	}
	return vs
}

func (s msgSuite[T, PT]) roundTrip(t *testing.T) {
	for name, mk := range s.values() {
		t.Run(name, func(t *testing.T) {
			want := mk()
			if err := want.Validate(); err != nil {
				t.Fatalf("fixture invalid: %v", err)
			}
			b := mustEncode(t, want) // stamps the version into want
			if !bytes.HasPrefix(b, []byte(`{"v":1,`)) {
				t.Errorf("encoding does not start with the version: %.80s", b)
			}
			got := PT(new(T))
			if err := protocol.Decode(b, got); err != nil {
				t.Fatalf("decode: %v\n%s", err, b)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip changed the message:\n got %+v\nwant %+v", got, want)
			}
			if again := mustEncode(t, got); !bytes.Equal(again, b) {
				t.Fatalf("re-encoding differs:\n%s\n%s", again, b)
			}
			// Whitespace around the value is fine.
			ws := append(append([]byte(" \t\r\n"), b...), " \n"...)
			if err := protocol.Decode(ws, PT(new(T))); err != nil {
				t.Fatalf("decode with surrounding whitespace: %v", err)
			}
		})
	}
}

func (s msgSuite[T, PT]) rejectMalformed(t *testing.T) {
	b := mustEncode(t, s.valid())
	cat := func(parts ...string) []byte { return []byte(strings.Join(parts, "")) }
	setV := func(v any) []byte { return editJSON(t, b, func(o map[string]any) { o["v"] = v }) }
	cases := map[string][]byte{
		"unknown field":          editJSON(t, b, func(o map[string]any) { o["bogus"] = 1 }),
		"unknown null field":     editJSON(t, b, func(o map[string]any) { o["extra"] = nil }),
		"embedded struct name":   editJSON(t, b, func(o map[string]any) { o["Versioned"] = map[string]any{"v": 1} }),
		"trailing brace":         cat(string(b), "}"),
		"trailing bracket":       cat(string(b), "]"),
		"trailing spaced brace":  cat(string(b), " \n}"),
		"trailing garbage":       cat(string(b), "x"),
		"trailing object":        cat(string(b), "{}"),
		"trailing copy":          cat(string(b), string(b)),
		"trailing null":          cat(string(b), " null"),
		"trailing number":        cat(string(b), "1"),
		"trailing comma":         cat(string(b), ","),
		"trailing NUL":           cat(string(b), "\x00"),
		"missing version":        editJSON(t, b, func(o map[string]any) { delete(o, "v") }),
		"version 0":              setV(0),
		"version 2":              setV(2),
		"version -1":             setV(-1),
		"version string":         setV("1"),
		"version float":          setV(json.Number("1.0")),
		"version exponent":       setV(json.Number("1e0")),
		"version null":           setV(nil),
		"version true":           setV(true),
		"version huge":           setV(json.Number("18446744073709551617")),
		"empty":                  nil,
		"blank":                  []byte(" \n"),
		"not JSON":               []byte("not json"),
		"null":                   []byte("null"),
		"array":                  []byte("[]"),
		"array of it":            cat("[", string(b), "]"),
		"string":                 []byte(`"v"`),
		"number":                 []byte("1"),
		"empty object":           []byte("{}"),
		"only version":           []byte(`{"v":2}`),
		"truncated":              b[:len(b)-1],
		"half":                   b[:len(b)/2],
		"BOM":                    cat("\ufeff", string(b)),
		"single quotes":          bytes.ReplaceAll(b, []byte(`"`), []byte(`'`)),
		"unquoted keys":          bytes.Replace(b, []byte(`"v"`), []byte(`v`), 1),
		"comment":                cat("/*c*/", string(b)),
		"NUL":                    []byte("\x00"),
		"invalid UTF-8 outside":  cat("\xff", string(b)),
		"version string escaped": bytes.Replace(b, []byte(`"v":1`), []byte(`"v":"\u0031"`), 1),
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			checkInvalid(t, fmt.Sprintf("decode %q", data), protocol.Decode(data, PT(new(T))))
		})
	}
	for _, w := range s.badWire {
		t.Run(w.name, func(t *testing.T) {
			data := editJSON(t, b, w.edit)
			checkInvalid(t, fmt.Sprintf("decode %s", data), protocol.Decode(data, PT(new(T))))
		})
	}
}

func (s msgSuite[T, PT]) rejectInvalidFields(t *testing.T) {
	for _, c := range s.bad {
		t.Run(c.name, func(t *testing.T) {
			m := s.valid()
			mustEncode(t, m) // stamp the version
			c.mut(m)
			checkInvalid(t, "Validate", m.Validate())
			if _, err := protocol.Encode(m); err == nil {
				t.Errorf("Encode accepted it")
			} else {
				checkInvalid(t, "Encode", err)
			}
			if c.noWire {
				return
			}
			data := rawJSON(t, m)
			checkInvalid(t, fmt.Sprintf("decode %.300s", data), protocol.Decode(data, PT(new(T))))
		})
	}
}

// badTokens are values ValidToken rejects, with whether JSON can carry them
// unchanged (invalid UTF-8 is repaired by json.Marshal into U+FFFD).
var badTokens = []struct {
	name, s string
	noWire  bool
}{
	{"empty", "", false},
	{"dot", "a.b", false},
	{"only dot", ".", false},
	{"star", "*", false},
	{"star inside", "a*", false},
	{"gt", ">", false},
	{"gt inside", "a>b", false},
	{"space", "a b", false},
	{"leading space", " a", false},
	{"at", "a@b", false},
	{"tab", "a\tb", false},
	{"newline", "a\nb", false},
	{"CR", "a\rb", false},
	{"NUL", "a\x00b", false},
	{"DEL", "a\x7fb", false},
	{"NBSP", "a\u00a0b", false},
	{"NEL", "a\u0085b", false},
	{"line separator", "a\u2028b", false},
	{"zero width space", "a\u200bb", false},
	{"bidi override", "a\u202eb", false},
	{"ideographic space", "a\u3000b", false},
	{"201 bytes", strings.Repeat("n", 201), false},
	{"201 bytes multibyte", strings.Repeat("é", 100) + "n", false},
	{"invalid UTF-8", "a\xffb", true},
	{"truncated rune", "a\xc3", true},
}

func tokenCases[PT any](field string, set func(PT, string)) []mutation[PT] {
	var ms []mutation[PT]
	for _, tok := range badTokens {
		ms = append(ms, mutation[PT]{name: field + " " + tok.name, mut: func(m PT) { set(m, tok.s) }, noWire: tok.noWire})
	}
	return ms
}

func cases[PT any](parts ...[]mutation[PT]) []mutation[PT] {
	var all []mutation[PT]
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

func one[PT any](name string, mut func(PT)) []mutation[PT] {
	return []mutation[PT]{{name: name, mut: mut}}
}

func noWire[PT any](name string, mut func(PT)) []mutation[PT] {
	return []mutation[PT]{{name: name, mut: mut, noWire: true}}
}

func manyTypes(n int) []protocol.TypeVersion {
	tvs := make([]protocol.TypeVersion, n)
	for i := range tvs {
		tvs[i] = protocol.TypeVersion{Type: fmt.Sprintf("T%d", i), Version: "v1"}
	}
	return tvs
}

// typesCases are the violations of a worker's type list.
func typesCases[PT any](set func(PT, []protocol.TypeVersion)) []mutation[PT] {
	ms := cases(
		one("types nil", func(m PT) { set(m, nil) }),
		one("types empty", func(m PT) { set(m, []protocol.TypeVersion{}) }),
		one("1001 types", func(m PT) { set(m, manyTypes(1001)) }),
		// One type at several versions is fine; at one version twice is not.
		one("duplicate type at a version", func(m PT) {
			set(m, []protocol.TypeVersion{{Type: "A", Version: "v1"}, {Type: "B"}, {Type: "A", Version: "v1"}})
		}),
		one("duplicate type same version", func(m PT) { set(m, []protocol.TypeVersion{{Type: "A"}, {Type: "A"}}) }),
	)
	for _, tok := range badTokens {
		ms = append(ms, mutation[PT]{name: "type " + tok.name, noWire: tok.noWire, mut: func(m PT) {
			set(m, []protocol.TypeVersion{{Type: "Ok"}, {Type: tok.s, Version: "v1"}})
		}})
		if tok.s == "" {
			continue // an empty version is allowed
		}
		ms = append(ms, mutation[PT]{name: "version " + tok.name, noWire: tok.noWire, mut: func(m PT) {
			set(m, []protocol.TypeVersion{{Type: "Ok", Version: tok.s}})
		}})
	}
	return ms
}

func manyIDs(n int) []uuid.UUID {
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.UUID{0: 1, 14: byte(i >> 8), 15: byte(i)}
	}
	return ids
}

func manyRuns(n int) []protocol.DeliveredRun {
	runs := make([]protocol.DeliveredRun, n)
	for i, id := range manyIDs(n) {
		runs[i] = protocol.DeliveredRun{RunID: id, Namespace: "n", Queue: "q", Type: "T", Attempt: 1, LeaseToken: 1}
	}
	return runs
}

func manyItems(n int) []protocol.ReportItem {
	items := make([]protocol.ReportItem, n)
	for i, id := range manyIDs(n) {
		items[i] = protocol.ReportItem{Kind: protocol.ReportRunRelease, RunID: id, LeaseToken: 1}
	}
	return items
}

func manyLabels(n int) map[string]string {
	l := make(map[string]string, n)
	for i := range n {
		l[fmt.Sprint("k", i)] = "v"
	}
	return l
}

func allSuites() map[string]suite {
	type (
		wk  = *protocol.Wakeup
		rf  = *protocol.RunFinished
		cn  = *protocol.Cancel
		sc  = *protocol.ScheduleChanged
		ru  = *protocol.RelayUp
		wr  = *protocol.WorkRequest
		dl  = *protocol.Delivery
		da  = *protocol.DeliveryAck
		rp  = *protocol.Report
		rr  = *protocol.ReportReply
		reg = *protocol.WorkerRegister
		hb  = *protocol.Heartbeat
		dr  = *protocol.WorkerDeregister
		pr  = *protocol.PayloadRequest
		pc  = *protocol.PayloadChunk
		rn  = *protocol.RegistrationNotice
		rup = *protocol.ReaperUp
	)
	wrongType := func(key string, v any) wireEdit {
		return wireEdit{fmt.Sprintf("%s as %T %v", key, v, v), func(o map[string]any) { o[key] = v }}
	}
	nested := func(name string, edit func(o map[string]any)) wireEdit { return wireEdit{name, edit} }
	return map[string]suite{
		"Wakeup": msgSuite[protocol.Wakeup, wk]{
			valid: validWakeup,
			variants: map[string]func() wk{
				"zero time":       func() wk { return &protocol.Wakeup{Namespace: "n", Queue: "q"} },
				"200-byte tokens": func() wk { return &protocol.Wakeup{Namespace: token200, Queue: token200, AvailableAt: t1} },
				"unicode tokens": func() wk {
					return &protocol.Wakeup{Namespace: "名前空間", Queue: "キュー-é_~!#$%&", AvailableAt: t1}
				},
				"html chars": func() wk { return &protocol.Wakeup{Namespace: "<ns", Queue: "a&b&lt;", AvailableAt: t1} },
			},
			bad: cases(
				tokenCases("namespace", func(m wk, s string) { m.Namespace = s }),
				tokenCases("queue", func(m wk, s string) { m.Queue = s }),
			),
			badWire: []wireEdit{
				wrongType("at", "yesterday"), wrongType("at", 0), wrongType("ns", 1), wrongType("ns", nil),
				wrongType("queue", []any{"q"}), wrongType("at", "2024-05-06 07:08:09Z"),
			},
		},
		"RunFinished": msgSuite[protocol.RunFinished, rf]{
			valid: validRunFinished,
			variants: map[string]func() rf{
				"failed":    func() rf { m := validRunFinished(); m.Status = "FAILED"; return m },
				"cancelled": func() rf { m := validRunFinished(); m.Status = "CANCELLED"; return m },
			},
			bad: cases(
				tokenCases("namespace", func(m rf, s string) { m.Namespace = s }),
				one("nil run id", func(m rf) { m.RunID = uuid.Nil }),
				one("status empty", func(m rf) { m.Status = "" }),
				one("status running", func(m rf) { m.Status = "RUNNING" }),
				one("status pending", func(m rf) { m.Status = "PENDING" }),
				one("status lower case", func(m rf) { m.Status = "completed" }),
				one("status padded", func(m rf) { m.Status = "COMPLETED " }),
			),
			badWire: []wireEdit{
				wrongType("run_id", "not-a-uuid"), wrongType("run_id", ""), wrongType("run_id", 7),
				wrongType("status", 1), wrongType("run_id", "0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e00"),
			},
		},
		"Cancel": msgSuite[protocol.Cancel, cn]{
			valid: validCancel,
			bad: cases(
				tokenCases("namespace", func(m cn, s string) { m.Namespace = s }),
				one("nil run id", func(m cn) { m.RunID = uuid.Nil }),
				one("nil worker id", func(m cn) { m.WorkerID = uuid.Nil }),
			),
			badWire: []wireEdit{wrongType("worker_id", "x"), wrongType("run_id", true)},
		},
		"ScheduleChanged": msgSuite[protocol.ScheduleChanged, sc]{
			valid: validScheduleChanged,
			variants: map[string]func() sc{
				"no next": func() sc { m := validScheduleChanged(); m.NextAt = nil; return m },
			},
			bad: cases(
				tokenCases("namespace", func(m sc, s string) { m.Namespace = s }),
				one("nil schedule id", func(m sc) { m.ScheduleID = uuid.Nil }),
			),
			badWire: []wireEdit{wrongType("next_at", "soon"), wrongType("schedule_id", nil), wrongType("next_at", 12)},
		},
		"RelayUp": msgSuite[protocol.RelayUp, ru]{
			valid: validRelayUp,
			variants: map[string]func() ru{
				"200-byte id": func() ru { return &protocol.RelayUp{RelayID: strings.Repeat("r", 200)} },
				"odd id":      func() ru { return &protocol.RelayUp{RelayID: "a b.c*>@<&", At: t1} },
			},
			bad: cases(
				one("empty id", func(m ru) { m.RelayID = "" }),
				one("201-byte id", func(m ru) { m.RelayID = strings.Repeat("r", 201) }),
			),
			badWire: []wireEdit{wrongType("relay_id", 5), wrongType("relay_id", nil), wrongType("at", "x")},
		},
		"WorkRequest": msgSuite[protocol.WorkRequest, wr]{
			valid: validWorkRequest,
			variants: map[string]func() wr{
				"min":        func() wr { m := validWorkRequest(); m.Credits, m.WaitMS, m.Seq = 1, 0, 0; return m },
				"max":        func() wr { m := validWorkRequest(); m.Credits, m.WaitMS, m.Seq = 10000, 600000, 1<<64-1; return m },
				"1000 types": func() wr { m := validWorkRequest(); m.Types = manyTypes(1000); return m },
			},
			bad: cases(
				one("nil worker id", func(m wr) { m.WorkerID = uuid.Nil }),
				tokenCases("namespace", func(m wr, s string) { m.Namespace = s }),
				tokenCases("queue", func(m wr, s string) { m.Queue = s }),
				one("credits 0", func(m wr) { m.Credits = 0 }),
				one("credits -1", func(m wr) { m.Credits = -1 }),
				one("credits 10001", func(m wr) { m.Credits = protocol.MaxCredits + 1 }),
				one("credits min int", func(m wr) { m.Credits = -1 << 63 }),
				one("wait -1", func(m wr) { m.WaitMS = -1 }),
				one("wait 600001", func(m wr) { m.WaitMS = 600001 }),
				typesCases(func(m wr, tvs []protocol.TypeVersion) { m.Types = tvs }),
			),
			badWire: []wireEdit{
				wrongType("credits", "8"), wrongType("credits", json.Number("8.5")), wrongType("credits", json.Number("8e0")),
				wrongType("seq", -1), wrongType("seq", json.Number("18446744073709551616")),
				wrongType("wait_ms", json.Number("1e3")), wrongType("types", map[string]any{}), wrongType("types", "T"),
				nested("unknown field in type", func(o map[string]any) { first(o, "types")["extra"] = 1 }),
				nested("type as number", func(o map[string]any) { first(o, "types")["type"] = 1 }),
			},
		},
		"Delivery": msgSuite[protocol.Delivery, dl]{
			valid: validDelivery,
			variants: map[string]func() dl{
				"minimal run": func() dl { return &protocol.Delivery{WorkerID: id1, Runs: manyRuns(1), Limits: limits1} },
				"10000 runs": func() dl {
					return &protocol.Delivery{WorkerID: id1, Runs: manyRuns(protocol.MaxCredits), Limits: limits1}
				},
				"equal limits": func() dl {
					m := validDelivery()
					m.Limits = protocol.PayloadLimits{WarnBytes: 5, MaxBytes: 5}
					return m
				},
				"null input":   func() dl { m := validDelivery(); m.Runs[0].Input = json.RawMessage("null"); return m },
				"string input": func() dl { m := validDelivery(); m.Runs[0].Input = json.RawMessage(`"x"`); return m },
				"empty policy": func() dl { m := validDelivery(); m.Runs[0].RetryPolicy = &retry.Policy{}; return m },
			},
			bad: cases(
				one("nil worker id", func(m dl) { m.WorkerID = uuid.Nil }),
				one("no runs", func(m dl) { m.Runs = nil }),
				one("empty runs", func(m dl) { m.Runs = []protocol.DeliveredRun{} }),
				one("10001 runs", func(m dl) { m.Runs = manyRuns(protocol.MaxCredits + 1) }),
				one("nil run id", func(m dl) { m.Runs[1].RunID = uuid.Nil }),
				tokenCases("namespace", func(m dl, s string) { m.Runs[1].Namespace = s }),
				tokenCases("queue", func(m dl, s string) { m.Runs[0].Queue = s }),
				tokenCases("type", func(m dl, s string) { m.Runs[0].Type = s }),
				one("attempt 0", func(m dl) { m.Runs[0].Attempt = 0 }),
				one("attempt -1", func(m dl) { m.Runs[1].Attempt = -1 }),
				one("lease 0", func(m dl) { m.Runs[0].LeaseToken = 0 }),
				one("lease -1", func(m dl) { m.Runs[1].LeaseToken = -1 }),
				noWire("input not JSON", func(m dl) { m.Runs[0].Input = json.RawMessage(`{"a":`) }),
				noWire("input two values", func(m dl) { m.Runs[0].Input = json.RawMessage(`1 2`) }),
				noWire("input bare word", func(m dl) { m.Runs[1].Input = json.RawMessage(`hello`) }),
				one("step id empty", func(m dl) { m.Runs[0].Steps[1].StepID = "" }),
				one("step attempt 0", func(m dl) { m.Runs[0].Steps[0].Attempt = 0 }),
				one("step run attempt negative", func(m dl) { m.Runs[0].Steps[1].RunAttempt = -1 }),
				one("step tries negative", func(m dl) { m.Runs[0].Steps[1].Tries = -2 }),
				one("step output size negative", func(m dl) { m.Runs[0].Steps[3].OutputSize = -1 }),
				one("step output and output size", func(m dl) { m.Runs[0].Steps[0].OutputSize = 3 }),
				one("input and input size", func(m dl) { m.Runs[0].InputSize = 3 }),
				one("input size negative", func(m dl) { m.Runs[1].InputSize = -1 }),
				one("no limits", func(m dl) { m.Limits = protocol.PayloadLimits{} }),
				one("warn above max", func(m dl) { m.Limits = protocol.PayloadLimits{WarnBytes: 6, MaxBytes: 5} }),
				one("max 0", func(m dl) { m.Limits.MaxBytes = 0 }),
				noWire("step output not JSON", func(m dl) { m.Runs[0].Steps[0].Output = json.RawMessage(`[1,`) }),
				one("policy negative interval", func(m dl) { m.Runs[0].RetryPolicy.InitialIntervalMS = -1 }),
				one("policy negative max interval", func(m dl) { m.Runs[0].RetryPolicy.MaxIntervalMS = -5 }),
				one("policy coefficient below 1", func(m dl) { m.Runs[0].RetryPolicy.BackoffCoefficient = 0.5 }),
				one("policy jitter above 1", func(m dl) { m.Runs[0].RetryPolicy.Jitter = 1.5 }),
				one("policy empty non-retryable", func(m dl) { m.Runs[0].RetryPolicy.NonRetryable = []string{"X", ""} }),
			),
			badWire: []wireEdit{
				wrongType("runs", map[string]any{}), wrongType("runs", nil), wrongType("runs", []any{}),
				nested("unknown field in run", func(o map[string]any) { first(o, "runs")["extra"] = 1 }),
				nested("unknown field in step", func(o map[string]any) { first(first(o, "runs"), "steps")["extra"] = 1 }),
				nested("unknown field in policy", func(o map[string]any) {
					first(o, "runs")["retry_policy"].(map[string]any)["InitialInterval"] = 5
				}),
				nested("lease as string", func(o map[string]any) { first(o, "runs")["lease"] = "7" }),
				nested("deadline not a time", func(o map[string]any) { first(o, "runs")["deadline_at"] = "tomorrow" }),
				nested("policy not an object", func(o map[string]any) { first(o, "runs")["retry_policy"] = 3 }),
				nested("max attempts float", func(o map[string]any) {
					first(o, "runs")["retry_policy"].(map[string]any)["max_attempts"] = json.Number("1.5")
				}),
			},
		},
		"DeliveryAck": msgSuite[protocol.DeliveryAck, da]{
			valid:    validDeliveryAck,
			variants: map[string]func() da{"refused": func() da { return &protocol.DeliveryAck{} }},
			badWire:  []wireEdit{wrongType("accepted", "true"), wrongType("accepted", 1)},
		},
		"Report": msgSuite[protocol.Report, rp]{
			valid: validReport,
			variants: map[string]func() rp{
				"10000 items": func() rp { m := validReport(); m.Items = manyItems(protocol.MaxReportItems); return m },
				"step kinds": func() rp {
					m := validReport()
					for _, k := range []string{"SLEEP", "EVENT", "CHILD", ""} {
						m.Items = append(m.Items, protocol.ReportItem{Kind: protocol.ReportStepCompleted, RunID: id1, LeaseToken: 1, StepID: strings.Repeat("s", 200), StepKind: k, Attempt: 1})
					}
					return m
				},
			},
			bad: cases(
				one("nil worker id", func(m rp) { m.WorkerID = uuid.Nil }),
				tokenCases("namespace", func(m rp, s string) { m.Namespace = s }),
				one("no items", func(m rp) { m.Items = nil }),
				one("10001 items", func(m rp) { m.Items = manyItems(protocol.MaxReportItems + 1) }),
				one("nil run id", func(m rp) { m.Items[3].RunID = uuid.Nil }),
				one("lease 0", func(m rp) { m.Items[5].LeaseToken = 0 }),
				one("lease negative", func(m rp) { m.Items[0].LeaseToken = -9 }),
				noWire("output not JSON", func(m rp) { m.Items[2].Output = json.RawMessage(`{`) }),
				noWire("step output not JSON", func(m rp) { m.Items[0].Output = json.RawMessage(`nul`) }),
				one("kind empty", func(m rp) { m.Items[4].Kind = "" }),
				one("kind unknown", func(m rp) { m.Items[4].Kind = "run_exploded" }),
				one("kind upper case", func(m rp) { m.Items[4].Kind = "RUN_COMPLETED" }),
				one("step id empty", func(m rp) { m.Items[0].StepID = "" }),
				one("step id 201 bytes", func(m rp) { m.Items[1].StepID = strings.Repeat("s", 201) }),
				one("step attempt 0", func(m rp) { m.Items[1].Attempt = 0 }),
				one("step attempt negative", func(m rp) { m.Items[0].Attempt = -1 }),
				one("step kind unknown", func(m rp) { m.Items[0].StepKind = "LAMBDA" }),
				one("step kind lower case", func(m rp) { m.Items[1].StepKind = "function" }),
				one("event wait without name", func(m rp) { m.Items[6].Name = "" }),
				one("event name with a space", func(m rp) { m.Items[6].Name = "paid now" }),
				one("event name 201 bytes", func(m rp) { m.Items[6].Name = strings.Repeat("e", 201) }),
				noWire("event name not UTF-8", func(m rp) { m.Items[6].Name = "p\xffaid" }),
				one("event wait without step", func(m rp) { m.Items[6].StepID = "" }),
				one("event wait attempt 0", func(m rp) { m.Items[6].Attempt = 0 }),
				one("name on a step item", func(m rp) { m.Items[0].Name = "paid" }),
				one("suspend on a sleep", func(m rp) { m.Items[4].Suspend = true }),
				one("child start without child", func(m rp) { m.Items[7].Child = nil }),
				one("child start attempt 0", func(m rp) { m.Items[7].Attempt = 0 }),
				tokenCases("child type", func(m rp, s string) { m.Items[7].Child.Type = s }),
				one("child queue with a dot", func(m rp) { m.Items[7].Child.Queue = "a.b" }),
				one("child version with a space", func(m rp) { m.Items[7].Child.Version = "v 1" }),
				noWire("child input not JSON", func(m rp) { m.Items[7].Child.Input = json.RawMessage(`{`) }),
				one("child policy jitter above 1", func(m rp) { m.Items[7].Child.RetryPolicy.Jitter = 2 }),
				one("child on a step item", func(m rp) { m.Items[0].Child = &protocol.ChildSpec{Type: "T"} }),
				one("sleep step id empty", func(m rp) { m.Items[8].Steps[1] = "" }),
				one("sleep step id 201 bytes", func(m rp) { m.Items[8].Steps[0] = strings.Repeat("s", 201) }),
				one("steps on a completion", func(m rp) { m.Items[2].Steps = []string{"a"} }),
				one("events on a failure", func(m rp) { m.Items[3].Events = true }),
				one("events seen on a failure", func(m rp) { m.Items[3].EventsSeen = new(int64) }),
				one("event names on a sleep", func(m rp) { m.Items[4].EventNames = []string{"add"} }),
				one("all events on a step", func(m rp) { m.Items[0].AllEvents = true }),
				one("events seen negative", func(m rp) { v := int64(-1); m.Items[2].EventsSeen = &v }),
				one("event names with a space", func(m rp) { m.Items[2].EventNames = []string{"add", "paid now"} }),
				one("101 event names", func(m rp) {
					m.Items[2].EventNames = nil
					for i := range protocol.MaxEventNames + 1 {
						m.Items[2].EventNames = append(m.Items[2].EventNames, fmt.Sprintf("e%d", i))
					}
				}),
				one("drain without name", func(m rp) { m.Items[10].Name = "" }),
				one("drain without step", func(m rp) { m.Items[10].StepID = "" }),
				one("suspend on a drain", func(m rp) { m.Items[10].Suspend = true }),
			),
			badWire: []wireEdit{
				wrongType("items", map[string]any{}), wrongType("items", []any{}), wrongType("items", nil),
				nested("unknown field in item", func(o map[string]any) { first(o, "items")["extra"] = 1 }),
				nested("kind as number", func(o map[string]any) { first(o, "items")["kind"] = 1 }),
				nested("until not a time", func(o map[string]any) { first(o, "items")["until"] = "later" }),
				nested("attempt float", func(o map[string]any) { first(o, "items")["attempt"] = json.Number("1.5") }),
			},
		},
		"ReportReply": msgSuite[protocol.ReportReply, rr]{
			valid: validReportReply,
			variants: map[string]func() rr{
				"nil results":   func() rr { return &protocol.ReportReply{} },
				"empty results": func() rr { return &protocol.ReportReply{Results: []protocol.ReportResult{}} },
			},
			bad: cases(
				one("code empty", func(m rr) { m.Results[2].Code = "" }),
				one("code unknown", func(m rr) { m.Results[0].Code = "maybe" }),
				one("code upper case", func(m rr) { m.Results[0].Code = "OK" }),
				noWire("output not JSON", func(m rr) { m.Results[4].Output = json.RawMessage(`{`) }),
				one("output on a lost lease", func(m rr) { m.Results[1].Output = json.RawMessage(`1`) }),
				one("waiting on an error", func(m rr) { m.Results[3].Waiting = true }),
				one("output and waiting", func(m rr) { m.Results[5].Output = json.RawMessage(`1`) }),
				one("output size and waiting", func(m rr) { m.Results[5].OutputSize = 9 }),
				one("output and output size", func(m rr) { m.Results[6].Output = json.RawMessage(`1`) }),
				one("output size negative", func(m rr) { m.Results[6].OutputSize = -1 }),
				one("output size on an error", func(m rr) { m.Results[3].OutputSize = 1 }),
			),
			badWire: []wireEdit{
				wrongType("results", map[string]any{}),
				nested("unknown field in result", func(o map[string]any) { first(o, "results")["extra"] = 1 }),
			},
		},
		"WorkerRegister": msgSuite[protocol.WorkerRegister, reg]{
			valid: validWorkerRegister,
			variants: map[string]func() reg{
				"minimal": func() reg {
					return &protocol.WorkerRegister{WorkerID: id1, Namespace: "n", Queue: "q", Types: []protocol.TypeVersion{{Type: "T"}}, MaxConcurrency: 1}
				},
				"max": func() reg {
					m := validWorkerRegister()
					m.Hostname, m.Version = strings.Repeat("h", 255), strings.Repeat("v", 200)
					m.Labels, m.Types, m.MaxConcurrency = manyLabels(64), manyTypes(1000), protocol.MaxCredits
					return m
				},
			},
			bad: cases(
				one("nil worker id", func(m reg) { m.WorkerID = uuid.Nil }),
				tokenCases("namespace", func(m reg, s string) { m.Namespace = s }),
				tokenCases("queue", func(m reg, s string) { m.Queue = s }),
				one("max concurrency 0", func(m reg) { m.MaxConcurrency = 0 }),
				one("max concurrency -1", func(m reg) { m.MaxConcurrency = -1 }),
				one("max concurrency 10001", func(m reg) { m.MaxConcurrency = protocol.MaxCredits + 1 }),
				one("hostname 256 bytes", func(m reg) { m.Hostname = strings.Repeat("h", 256) }),
				one("version 201 bytes", func(m reg) { m.Version = strings.Repeat("v", 201) }),
				one("65 labels", func(m reg) { m.Labels = manyLabels(65) }),
				typesCases(func(m reg, tvs []protocol.TypeVersion) { m.Types = tvs }),
			),
			badWire: []wireEdit{
				wrongType("labels", []any{"a"}), wrongType("pid", "1"), wrongType("max_concurrency", json.Number("2.0")),
				nested("label value number", func(o map[string]any) { o["labels"].(map[string]any)["zone"] = 1 }),
			},
		},
		"Heartbeat": msgSuite[protocol.Heartbeat, hb]{
			valid: validHeartbeat,
			variants: map[string]func() hb{
				"no runs":    func() hb { m := validHeartbeat(); m.Runs, m.Draining = nil, false; return m },
				"10000 runs": func() hb { m := validHeartbeat(); m.Runs = manyIDs(protocol.MaxCredits); return m },
			},
			bad: cases(
				one("nil worker id", func(m hb) { m.WorkerID = uuid.Nil }),
				tokenCases("namespace", func(m hb, s string) { m.Namespace = s }),
				tokenCases("queue", func(m hb, s string) { m.Queue = s }),
				one("10001 runs", func(m hb) { m.Runs = manyIDs(protocol.MaxCredits + 1) }),
				one("zero sent_at", func(m hb) { m.SentAt = time.Time{} }),
				one("zero sent_at in a zone", func(m hb) { m.SentAt = time.Time{}.In(time.FixedZone("X", 3600)) }),
			),
			badWire: []wireEdit{
				wrongType("sent_at", nil), wrongType("runs", []any{"nope"}), wrongType("runs", "x"),
				wireEdit{"missing sent_at", func(o map[string]any) { delete(o, "sent_at") }},
			},
		},
		"PayloadRequest": msgSuite[protocol.PayloadRequest, pr]{
			valid: validPayloadRequest,
			variants: map[string]func() pr{
				"input":           func() pr { m := validPayloadRequest(); m.StepID, m.Attempt = "", 0; return m },
				"longest step id": func() pr { m := validPayloadRequest(); m.StepID = token200; return m },
			},
			bad: cases(
				tokenCases("namespace", func(m pr, s string) { m.Namespace = s }),
				one("nil run id", func(m pr) { m.RunID = uuid.Nil }),
				one("lease 0", func(m pr) { m.LeaseToken = 0 }),
				one("step without attempt", func(m pr) { m.Attempt = 0 }),
				one("attempt without step", func(m pr) { m.StepID = "" }),
				one("step id 201 bytes", func(m pr) { m.StepID = token200 + "x" }),
				one("negative offset", func(m pr) { m.Offset = -1 }),
				one("length 0", func(m pr) { m.Length = 0 }),
				one("length above 64 MiB", func(m pr) { m.Length = 64<<20 + 1 }),
			),
			badWire: []wireEdit{wrongType("offset", "0"), wrongType("data", 1)},
		},
		"PayloadChunk": msgSuite[protocol.PayloadChunk, pc]{
			valid: validPayloadChunk,
			variants: map[string]func() pc{
				"empty payload": func() pc { return &protocol.PayloadChunk{Code: protocol.ResultOK} },
				"lease lost":    func() pc { return &protocol.PayloadChunk{Code: protocol.ResultLeaseLost, Message: "gone"} },
			},
			bad: cases(
				one("unknown code", func(m pc) { m.Code = "maybe" }),
				one("more data than the total", func(m pc) { m.Total = 2 }),
				one("data with an error", func(m pc) { m.Code = protocol.ResultError }),
			),
			badWire: []wireEdit{wrongType("data", 12), wrongType("total", "1")},
		},
		"WorkerDeregister": msgSuite[protocol.WorkerDeregister, dr]{
			valid: validWorkerDeregister,
			bad: cases(
				one("nil worker id", func(m dr) { m.WorkerID = uuid.Nil }),
				tokenCases("namespace", func(m dr, s string) { m.Namespace = s }),
			),
			badWire: []wireEdit{
				wrongType("worker_id", "00000000-0000-0000-0000-000000000000"),
				wireEdit{"missing worker_id", func(o map[string]any) { delete(o, "worker_id") }},
			},
		},
		"RegistrationNotice": msgSuite[protocol.RegistrationNotice, rn]{
			valid: func() rn { return &protocol.RegistrationNotice{Namespace: "ns", WorkerID: id1} },
			variants: map[string]func() rn{
				"ask": func() rn { return &protocol.RegistrationNotice{Namespace: "ns", WorkerID: id1, Ask: true} },
			},
			bad: cases(
				tokenCases("namespace", func(m rn, s string) { m.Namespace = s }),
				one("nil worker id", func(m rn) { m.WorkerID = uuid.Nil }),
			),
			badWire: []wireEdit{wrongType("ask", "yes"), wrongType("worker_id", 1),
				wireEdit{"missing ns", func(o map[string]any) { delete(o, "ns") }}},
		},
		"ReaperUp": msgSuite[protocol.ReaperUp, rup]{
			valid:   func() rup { return &protocol.ReaperUp{ReaperID: id1} },
			bad:     one("nil reaper id", func(m rup) { m.ReaperID = uuid.Nil }),
			badWire: []wireEdit{wrongType("reaper_id", "x"), wireEdit{"missing reaper_id", func(o map[string]any) { delete(o, "reaper_id") }}},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	for name, s := range allSuites() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s.roundTrip(t)
		})
	}
}

func TestDecodeRejectsMalformed(t *testing.T) {
	for name, s := range allSuites() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s.rejectMalformed(t)
		})
	}
}

func TestRejectsInvalidFields(t *testing.T) {
	for name, s := range allSuites() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s.rejectInvalidFields(t)
		})
	}
}

func TestEncodeStampsVersion(t *testing.T) {
	for _, v := range []int{0, 2, -1} {
		m := validWakeup()
		m.V = v
		b := mustEncode(t, m)
		if m.V != protocol.Version {
			t.Errorf("Encode left version %d", m.V)
		}
		var got protocol.Wakeup
		if err := protocol.Decode(b, &got); err != nil || got.V != protocol.Version {
			t.Errorf("decode: %v, version %d", err, got.V)
		}
	}
}

func TestDecodeStrictness(t *testing.T) {
	// Accepted spellings that still decode to the same message.
	var m protocol.Cancel
	urn := `{"v":1,"ns":"default","run_id":"urn:uuid:` + id1.String() + `","worker_id":"` + id2.String() + `"}`
	if err := protocol.Decode([]byte(urn), &m); err != nil || m.RunID != id1 {
		t.Errorf("urn uuid: %v %v", err, m.RunID)
	}
	// A token smuggled in through a JSON escape is still checked.
	for _, ns := range []string{`a\u002eb`, `\u002a`, `a\u0020b`, `a\u0000b`, `a\u2028b`, `a\u00a0b`} {
		data := []byte(`{"v":1,"ns":"` + ns + `","queue":"q","at":"2024-01-01T00:00:00Z"}`)
		checkInvalid(t, string(data), protocol.Decode(data, &protocol.Wakeup{}))
	}
	// Lone surrogates decode to U+FFFD, which is a printable token.
	data := []byte(`{"v":1,"ns":"a\ud800","queue":"q","at":"2024-01-01T00:00:00Z"}`)
	var w protocol.Wakeup
	if err := protocol.Decode(data, &w); err != nil || w.Namespace != "a\ufffd" {
		t.Errorf("lone surrogate: %v %q", err, w.Namespace)
	}
}

func TestErrInvalidMessages(t *testing.T) {
	// Errors name the message type, for the logs of whoever drops it.
	err := protocol.Decode([]byte(`{"v":1}`), &protocol.Wakeup{})
	if err == nil || !strings.Contains(err.Error(), "Wakeup") {
		t.Errorf("error %v does not name the type", err)
	}
	_, err = protocol.Encode(&protocol.Cancel{Namespace: "n"})
	if err == nil || !strings.Contains(err.Error(), "Cancel") {
		t.Errorf("error %v does not name the type", err)
	}
}
