package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// binaryRoundTrip encodes m in binary and checks it decodes to what its
// JSON form decodes to.
func binaryRoundTrip[T any, PT msgPtr[T]](t *testing.T, m PT) []byte {
	t.Helper()
	b, err := protocol.EncodeAs(m, protocol.Binary)
	if err != nil {
		t.Fatal(err)
	}
	if protocol.EncodingOf(b) != protocol.Binary {
		t.Fatalf("%T has no binary form: %q", m, b)
	}
	j := mustEncode(t, m)
	if len(b) >= len(j) {
		t.Errorf("%T: binary %d bytes, JSON %d", m, len(b), len(j))
	}
	fromB, fromJ := PT(new(T)), PT(new(T))
	if err := protocol.Decode(b, fromB); err != nil {
		t.Fatalf("%T: %v", m, err)
	}
	if err := protocol.Decode(j, fromJ); err != nil {
		t.Fatal(err)
	}
	normalize(fromB)
	normalize(fromJ)
	if !reflect.DeepEqual(fromB, fromJ) {
		t.Fatalf("binary decodes to\n%#v\nJSON to\n%#v", fromB, fromJ)
	}
	return b
}

func TestBinaryRoundTrip(t *testing.T) {
	binaryRoundTrip(t, validWorkRequest())
	binaryRoundTrip(t, validDelivery())
	binaryRoundTrip(t, validDeliveryAck())
	binaryRoundTrip(t, validReport())
	binaryRoundTrip(t, validReportReply())

	// Nested messages longer than a one-byte length, and a large payload.
	d := validDelivery()
	d.Runs[0].Input = json.RawMessage(`"` + strings.Repeat("x", 300) + `"`)
	d.Runs[0].Steps[0].Output = json.RawMessage(`"` + strings.Repeat("y", 70000) + `"`)
	d.Runs[0].RetryPolicy = &retry.Policy{MaxAttempts: -1, BackoffCoefficient: 1.5, Jitter: -1,
		NonRetryable: []string{"A", "B"}, InitialIntervalMS: 10, MaxIntervalMS: 1 << 40}
	binaryRoundTrip(t, d)
}

func TestBinaryOnlyForHotMessages(t *testing.T) {
	b, err := protocol.EncodeAs(validWakeup(), protocol.Binary)
	if err != nil || protocol.EncodingOf(b) != protocol.JSON || !json.Valid(b) {
		t.Fatalf("a message without a binary form: %q, %v", b, err)
	}
	// A binary message of one type is not another.
	rb, _ := protocol.EncodeAs(validReport(), protocol.Binary)
	if err := protocol.Decode(rb, &protocol.Delivery{}); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("report decoded as a delivery: %v", err)
	}
	if err := protocol.Decode(rb, &protocol.Wakeup{}); !errors.Is(err, protocol.ErrInvalid) {
		t.Fatalf("binary decoded as a wakeup: %v", err)
	}
}

func TestBinaryMalformed(t *testing.T) {
	b, _ := protocol.EncodeAs(validDelivery(), protocol.Binary)
	for name, data := range map[string][]byte{
		"truncated":     b[:len(b)-3],
		"header only":   b[:2],
		"wrong version": append([]byte{b[0], b[1], 2}, b[3:]...),
		"bad wire type": append(bytes.Clone(b), 0x0b),
		"field zero":    append(bytes.Clone(b), 0x00, 0x01),
		"long length":   append(bytes.Clone(b), 0x0a, 0x7f),
		"bad uuid":      append(bytes.Clone(b), 0x0a, 0x01, 0x01),
		"type mismatch": append(bytes.Clone(b), 0x08, 0x01), // worker id as a varint
	} {
		var d protocol.Delivery
		if err := protocol.Decode(data, &d); !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestBinaryUnknownFields: a reader skips fields added after it was
// written, at the top and nested, so a field can be added without a new
// protocol version.
func TestBinaryUnknownFields(t *testing.T) {
	m := validDelivery()
	b, _ := protocol.EncodeAs(m, protocol.Binary)
	b = append(b, 0xf8, 0x07, 0x05, 0xfa, 0x07, 0x02, 'h', 'i') // fields 127 (varint, bytes)
	var got protocol.Delivery
	if err := protocol.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	normalize(&got)
	normalize(m)
	if !reflect.DeepEqual(&got, m) {
		t.Fatalf("got %#v", got)
	}
}

func TestBinaryInvalidUTF8(t *testing.T) {
	r := validReport()
	r.Items[0].Error = "bad \xff byte"
	b, err := protocol.EncodeAs(r, protocol.Binary)
	if err != nil {
		t.Fatal(err)
	}
	var got protocol.Report
	if err := protocol.Decode(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Items[0].Error != "bad \uFFFD byte" {
		t.Fatalf("error %q", got.Items[0].Error)
	}
}

// BenchmarkWire encodes and decodes the messages of one one-step run in
// each encoding: its delivery, its report (the step and the run's end)
// and the reply.
func BenchmarkWire(b *testing.B) {
	delivery := &protocol.Delivery{WorkerID: id1, Seq: 42, Limits: protocol.PayloadLimits{WarnBytes: 1 << 20, MaxBytes: 2 << 20},
		Runs: []protocol.DeliveredRun{{RunID: id2, Namespace: "bench", Queue: "bench", Type: "noop", Attempt: 1, LeaseToken: 7,
			Input: json.RawMessage(`{"n":1}`), RetryPolicy: &retry.Policy{MaxAttempts: 5, InitialIntervalMS: 1000, MaxIntervalMS: 60000},
			TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", AvailableAt: tp(t0)}}}
	report := &protocol.Report{WorkerID: id1, Namespace: "bench", Items: []protocol.ReportItem{
		{Kind: protocol.ReportStepCompleted, RunID: id2, LeaseToken: 7, StepID: "s0", StepKind: "FUNCTION", Attempt: 1,
			Output: json.RawMessage(`1`), StartedAt: tp(t0), FinishedAt: tp(t1)},
		{Kind: protocol.ReportRunCompleted, RunID: id2, LeaseToken: 7, Output: json.RawMessage(`{"n":1}`)}}}
	reply := &protocol.ReportReply{Results: []protocol.ReportResult{{Code: protocol.ResultOK}, {Code: protocol.ResultOK}}}
	for _, enc := range []struct {
		name string
		enc  protocol.Encoding
	}{{"json", protocol.JSON}, {"binary", protocol.Binary}} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			size := 0
			for b.Loop() {
				size = 0
				for _, m := range []protocol.Message{delivery, report, reply} {
					data, err := protocol.EncodeAs(m, enc.enc)
					if err != nil {
						b.Fatal(err)
					}
					size += len(data)
					var into protocol.Message
					switch m.(type) {
					case *protocol.Delivery:
						into = &protocol.Delivery{}
					case *protocol.Report:
						into = &protocol.Report{}
					default:
						into = &protocol.ReportReply{}
					}
					if err := protocol.Decode(data, into); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(size), "bytes/run")
		})
	}
}
