package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// msgPtr is a pointer to a wire type: what Encode and Decode take.
type msgPtr[T any] interface {
	*T
	protocol.Message
}

// Fixed values keep fixtures deterministic (and free of monotonic clock
// readings, which do not survive JSON).
var (
	id1 = uuid.MustParse("0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001")
	id2 = uuid.MustParse("0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002")
	id3 = uuid.MustParse("0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0003")
	t0  = time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	t1  = t0.Add(90 * time.Second)
)

func tp(t time.Time) *time.Time { return &t }

func i64p(v int64) *int64 { return &v }

func types1() []protocol.TypeVersion {
	return []protocol.TypeVersion{{Type: "OrderFlow", Version: "v1"}, {Type: "Refund"}}
}

// Valid fixtures: fresh values on every call, so tests may mutate them.

func validWakeup() *protocol.Wakeup {
	return &protocol.Wakeup{Namespace: "default", Queue: "emails", AvailableAt: t0}
}

func validRunFinished() *protocol.RunFinished {
	return &protocol.RunFinished{Namespace: "default", RunID: id1, Status: "COMPLETED"}
}

func validCancel() *protocol.Cancel {
	return &protocol.Cancel{Namespace: "default", RunID: id1, WorkerID: id2}
}

func validScheduleChanged() *protocol.ScheduleChanged {
	return &protocol.ScheduleChanged{Namespace: "default", ScheduleID: id1, NextAt: tp(t1)}
}

func validRelayUp() *protocol.RelayUp {
	return &protocol.RelayUp{RelayID: "relay-1@host", At: t0}
}

func validWorkRequest() *protocol.WorkRequest {
	return &protocol.WorkRequest{WorkerID: id1, Namespace: "default", Queue: "emails", Credits: 8, Types: types1(), Seq: 42, WaitMS: 30000}
}

// limits1 are payload limits a delivery may carry.
var limits1 = protocol.PayloadLimits{WarnBytes: 1 << 20, MaxBytes: 2 << 20}

func validDelivery() *protocol.Delivery {
	return &protocol.Delivery{
		WorkerID: id1,
		Seq:      42,
		Runs: []protocol.DeliveredRun{
			{
				RunID: id2, Namespace: "default", Queue: "emails", Type: "OrderFlow", Version: "v1",
				Attempt: 2, LeaseToken: 7, Input: json.RawMessage(`{"order":17,"items":[1,2]}`),
				Steps: []protocol.StepState{
					{StepID: "charge", Status: "COMPLETED", Attempt: 1, Output: json.RawMessage(`"ok"`)},
					{StepID: "ship", Status: "FAILED", Attempt: 3, Error: "boom", ErrorType: "Boom", RetryAt: tp(t1), RunAttempt: 2, Tries: 2},
					{StepID: "event:paid", Status: "PENDING", Attempt: 1, RetryAt: tp(t1), RunAttempt: 1},
					{StepID: "big", Status: "COMPLETED", Attempt: 1, RunAttempt: 2, OutputSize: 1 << 20},
				},
				TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
				DeadlineAt:  tp(t1),
				RetryPolicy: &retry.Policy{MaxAttempts: 3, BackoffCoefficient: 1.5, Jitter: 0.1, NonRetryable: []string{"Fatal"}, InitialIntervalMS: 500, MaxIntervalMS: 10000},
				AvailableAt: tp(t0),
				EventSeq:    i64p(3),
			},
			{RunID: id3, Namespace: "default", Queue: "emails", Type: "Refund", Attempt: 1, LeaseToken: 1, InputSize: 70000,
				EventSeq: i64p(0)},
		},
		Limits: protocol.PayloadLimits{WarnBytes: 1 << 20, MaxBytes: 2 << 20},
	}
}

func validDeliveryAck() *protocol.DeliveryAck { return &protocol.DeliveryAck{Accepted: true} }

func validReport() *protocol.Report {
	return &protocol.Report{
		WorkerID:  id1,
		Namespace: "default",
		Items: []protocol.ReportItem{
			{Kind: protocol.ReportStepCompleted, RunID: id2, LeaseToken: 7, StepID: "charge", StepKind: "FUNCTION", Attempt: 1, Output: json.RawMessage(`{"charged":true}`), StartedAt: tp(t0), FinishedAt: tp(t1)},
			{Kind: protocol.ReportStepFailed, RunID: id2, LeaseToken: 7, StepID: "ship", Attempt: 2, Error: "timeout", ErrorType: "Timeout", Until: tp(t1)},
			{Kind: protocol.ReportRunCompleted, RunID: id2, LeaseToken: 7, Output: json.RawMessage(`[1,"two",null]`),
				EventsSeen: i64p(3), EventNames: []string{"add", "paid.v2"}},
			{Kind: protocol.ReportRunFailed, RunID: id3, LeaseToken: 9, Error: "bad input", ErrorType: "Validation", NonRetryable: true},
			{Kind: protocol.ReportRunSleep, RunID: id3, LeaseToken: 9, Until: tp(t1)},
			{Kind: protocol.ReportRunRelease, RunID: id3, LeaseToken: 9},
			{Kind: protocol.ReportEventWait, RunID: id2, LeaseToken: 7, StepID: "event:paid", Attempt: 1, Name: "paid.v2", Until: tp(t1), Suspend: true, StartedAt: tp(t0)},
			{Kind: protocol.ReportChildStart, RunID: id2, LeaseToken: 7, StepID: "child-1", Attempt: 1, Child: &protocol.ChildSpec{
				Type: "Refund", Version: "v2", Queue: "refunds", Input: json.RawMessage(`{"order":17}`), Priority: 3,
				RetryPolicy: &retry.Policy{MaxAttempts: 2, InitialIntervalMS: 100}}},
			{Kind: protocol.ReportRunSleep, RunID: id2, LeaseToken: 7, Until: tp(t1), Steps: []string{"child-1", "child-2"}, Events: true},
			{Kind: protocol.ReportRunContinue, RunID: id3, LeaseToken: 9, Output: json.RawMessage(`{}`), EventsSeen: i64p(0), AllEvents: true},
			{Kind: protocol.ReportEventDrain, RunID: id2, LeaseToken: 7, StepID: "drain:add", Attempt: 1, Name: "add", StartedAt: tp(t0)},
		},
	}
}

func validReportReply() *protocol.ReportReply {
	return &protocol.ReportReply{Results: []protocol.ReportResult{
		{Code: protocol.ResultOK}, {Code: protocol.ResultLeaseLost, Message: "lease 7 is gone"},
		{Code: protocol.ResultInvalid, Message: "no"}, {Code: protocol.ResultError, Message: "db down"},
		{Code: protocol.ResultOK, Output: json.RawMessage(`{"amount":5}`)}, {Code: protocol.ResultOK, Waiting: true},
		{Code: protocol.ResultOK, OutputSize: 20000}, {Code: protocol.ResultRerun, Message: "events arrived"},
	}}
}

func validPayloadRequest() *protocol.PayloadRequest {
	return &protocol.PayloadRequest{Namespace: "default", RunID: id2, LeaseToken: 7, StepID: "big", Attempt: 1, Offset: 4096, Length: 1 << 20}
}

func validPayloadChunk() *protocol.PayloadChunk {
	return &protocol.PayloadChunk{Code: protocol.ResultOK, Data: []byte(`{"a":"`), Total: 70000}
}

func validWorkerRegister() *protocol.WorkerRegister {
	return &protocol.WorkerRegister{
		WorkerID: id1, Namespace: "default", Queue: "emails", Hostname: "box-1", PID: 4242, Version: "1.2.3",
		Types: types1(), MaxConcurrency: 16, Labels: map[string]string{"zone": "eu-1", "tier": "gold"},
	}
}

func validHeartbeat() *protocol.Heartbeat {
	return &protocol.Heartbeat{WorkerID: id1, Namespace: "default", Queue: "emails", Runs: []uuid.UUID{id2, id3}, Draining: true, SentAt: t0}
}

func validWorkerDeregister() *protocol.WorkerDeregister {
	return &protocol.WorkerDeregister{WorkerID: id1, Namespace: "default"}
}

// mustEncode encodes a message that is known to be valid.
func mustEncode(tb testing.TB, m protocol.Message) []byte {
	tb.Helper()
	b, err := protocol.Encode(m)
	if err != nil {
		tb.Fatalf("encode %T: %v", m, err)
	}
	return b
}

// rawJSON marshals m as it stands, bypassing Encode's validation (and its
// version stamp).
func rawJSON(tb testing.TB, m protocol.Message) []byte {
	tb.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatalf("marshal %T: %v", m, err)
	}
	return b
}

// editJSON decodes a valid encoding into generic JSON, lets edit change it
// and encodes it again: a way to build wire bytes no Go value would encode.
func editJSON(tb testing.TB, valid []byte, edit func(obj map[string]any)) []byte {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(valid))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		tb.Fatalf("generic decode: %v", err)
	}
	edit(obj)
	b, err := json.Marshal(obj)
	if err != nil {
		tb.Fatalf("generic encode: %v", err)
	}
	return b
}

// first returns the first object of the array under key.
func first(obj map[string]any, key string) map[string]any {
	return obj[key].([]any)[0].(map[string]any)
}

// checkInvalid fails unless err wraps protocol.ErrInvalid.
func checkInvalid(tb testing.TB, what string, err error) {
	tb.Helper()
	if err == nil {
		tb.Errorf("%s: accepted, want an error wrapping ErrInvalid", what)
	} else if !errors.Is(err, protocol.ErrInvalid) {
		tb.Errorf("%s: error %v does not wrap ErrInvalid", what, err)
	}
}

// normalize rewrites v (a pointer) in place into a canonical form so that
// two decodings of equivalent wire bytes compare equal with reflect.DeepEqual:
// json.RawMessage becomes its compact, re-encoded form; empty slices and maps
// become nil (omitempty drops them, so they decode as nil); times are UTC.
func normalize(v any) {
	normalizeValue(reflect.ValueOf(v))
}

var (
	rawType  = reflect.TypeFor[json.RawMessage]()
	timeType = reflect.TypeFor[time.Time]()
)

func normalizeValue(v reflect.Value) {
	switch {
	case v.Type() == rawType:
		if v.Len() == 0 {
			v.SetZero()
			return
		}
		canon, err := json.Marshal(json.RawMessage(v.Bytes()))
		if err != nil {
			panic(err) // only valid JSON reaches here
		}
		v.SetBytes(canon)
		return
	case v.Type() == timeType:
		if v.CanSet() {
			v.Set(reflect.ValueOf(v.Interface().(time.Time).UTC()))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			normalizeValue(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if f := v.Field(i); f.CanSet() {
				normalizeValue(f)
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.SetZero()
			return
		}
		for i := range v.Len() {
			normalizeValue(v.Index(i))
		}
	case reflect.Map:
		if v.Len() == 0 {
			v.SetZero()
			return
		}
		if k := v.Type().Elem().Kind(); k != reflect.String && k != reflect.Bool && k != reflect.Int {
			panic("normalize: map of " + v.Type().Elem().String() + " is not handled")
		}
	}
}

// token200 is the longest valid token.
var token200 = strings.Repeat("n", 200)
