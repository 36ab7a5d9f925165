package protocol_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// Every decoder is fuzzed with the same properties (checkDecode): Decode
// never panics and fails only with ErrInvalid; what it accepts is valid
// JSON or a binary message, passes Validate, encodes, and decodes again to
// an equal value whose encoding is a fixed point — in JSON and, for the
// messages that have one, in the binary form too. Plain `go test` runs the
// seeds below.

// commonSeeds are tricky inputs for every decoder.
var commonSeeds = []string{
	"", " ", "null", "{}", "[]", `""`, "0", "\x00", "\xff", "{", "}",
	`{"v":1}`, `{"v":1}}`, `{"v":1}]`, `{"v":1} `, `{"v":0}`, `{"v":2}`, `{"v":-1}`,
	`{"v":1.0}`, `{"v":1e0}`, `{"v":"1"}`, `{"v":null}`, `{"V":1}`, `{"v":1,"v":1}`,
	`{"v":1,"x":1}`, `{"v":1,"Versioned":{"v":1}}`, `{"v":99999999999999999999}`,
	`[{"v":1}]`, `{"v":1}{"v":1}`, `{"v":1}null`, "\ufeff{\"v\":1}",
	"\xc1", "\xc1\x00", "\xc1\x01", "\xc1\x01\x01", "\xc1\x02\x01", "\xc1\x04\x01", "\xc1\x05\x01",
	"\xc1\x01\x02", "\xc1\x01\x80", "\xc1\x05\x01\x0a\x00", "\xc1\x05\x01\x0b", "\xc1\x03\x01\x08\x02",
}

// binarySeedsFrom derives tricky variants of a valid binary encoding b.
func binarySeedsFrom(b []byte) [][]byte {
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	flip := func(i int) []byte {
		c := bytes.Clone(b)
		c[i%len(c)] ^= 0x80
		return c
	}
	return [][]byte{
		b,
		cat(b, []byte{0xf8, 0x07, 0x05}),       // unknown varint field 127
		cat(b, []byte{0xfa, 0x07, 0x02, 1, 2}), // unknown bytes field 127
		cat(b, []byte{0xfb, 0x07}),             // unknown wire type
		cat(b, []byte{0x00}),                   // field 0
		cat(b, []byte{0x0a}),                   // truncated
		cat(b[:2], []byte{2}, b[3:]),           // wrong version
		b[:len(b)/2], b[:len(b)-1], flip(3), flip(len(b) / 2), flip(len(b) - 2),
	}
}

// seedsFrom derives tricky variants of a valid encoding b.
func seedsFrom(tb testing.TB, b []byte) [][]byte {
	tb.Helper()
	var indented bytes.Buffer
	if err := json.Indent(&indented, b, "", "\t "); err != nil {
		tb.Fatal(err)
	}
	body := b[1:] // after '{'
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	return [][]byte{
		b,
		indented.Bytes(), // whitespace inside embedded raw JSON too
		cat(b, []byte("}")),
		cat(b, []byte("]")),
		cat(b, []byte(" \r\n\t")),
		cat(b, []byte(",")),
		cat([]byte(`{"v":1,`), body),     // duplicate key
		cat([]byte(`{"V":1,`), body),     // case-folded duplicate key
		cat([]byte(`{"v":2,`), body),     // last version wins
		cat([]byte(`{"zz":null,`), body), // unknown field
		bytes.Replace(b, []byte(`"v":1`), []byte(`"v":2`), 1), // wrong version
		bytes.Replace(b, []byte("default"), []byte("def.ault"), 1),
		bytes.Replace(b, []byte("default"), []byte(`def\u002eault`), 1),
		bytes.Replace(b, []byte("default"), []byte("def\xffault"), 1),
		bytes.Replace(b, []byte("default"), []byte(`def\ud800ault`), 1),
		bytes.Replace(b, []byte("default"), []byte(`def\u0085ault`), 1),
		bytes.Replace(b, []byte("0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001"), []byte("urn:uuid:0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001"), 1),
		bytes.Replace(b, []byte("0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001"), []byte("{0B5C0F4E-7A5D-4C1E-9D33-6F2C1A8E0001}"), 1),
		bytes.Replace(b, []byte("0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001"), []byte("0b5c0f4e7a5d4c1e9d336f2c1a8e0001"), 1),
		bytes.Replace(b, []byte("0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001"), []byte("00000000-0000-0000-0000-000000000000"), -1),
		bytes.Replace(b, []byte("2024-05-06T07:08:09.123456789Z"), []byte("2024-05-06T09:08:09.123456789+02:00"), 1),
		bytes.Replace(b, []byte("2024-05-06T07:08:09.123456789Z"), []byte("2024-05-06T07:08:09+00:00"), 1),
		bytes.Replace(b, []byte("2024-05-06T07:08:09.123456789Z"), []byte("0000-01-01T00:00:00+23:59"), 1),
		bytes.Replace(b, []byte("2024-05-06T07:08:09.123456789Z"), []byte("9999-12-31T23:59:59.999999999-23:59"), 1),
		bytes.Replace(b, []byte("2024-05-06T07:08:09.123456789Z"), []byte("0001-01-01T00:00:00Z"), -1),
		b[:len(b)/2],
	}
}

func fuzzDecode[T any, PT msgPtr[T]](f *testing.F, valid []PT, extra ...string) {
	for _, v := range valid {
		for _, s := range seedsFrom(f, mustEncode(f, v)) {
			f.Add(s)
		}
		if b, err := protocol.EncodeAs(v, protocol.Binary); err != nil {
			f.Fatal(err)
		} else if protocol.EncodingOf(b) == protocol.Binary {
			for _, s := range binarySeedsFrom(b) {
				f.Add(s)
			}
		}
	}
	for _, s := range commonSeeds {
		f.Add([]byte(s))
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecode[T, PT](t, data) })
}

func checkDecode[T any, PT msgPtr[T]](t *testing.T, data []byte) {
	m1 := PT(new(T))
	if err := protocol.Decode(data, m1); err != nil {
		if !errors.Is(err, protocol.ErrInvalid) {
			t.Fatalf("Decode error %v does not wrap ErrInvalid", err)
		}
		return
	}
	if protocol.EncodingOf(data) == protocol.JSON && !json.Valid(data) {
		t.Fatalf("Decode accepted invalid JSON %q", data)
	}
	if err := m1.Validate(); err != nil {
		t.Fatalf("Decode accepted a message Validate rejects: %v\n%q", err, data)
	}
	e1, err := protocol.Encode(m1)
	if err != nil {
		t.Fatalf("Encode of a decoded message: %v\n%q", err, data)
	}
	m2 := PT(new(T))
	if err := protocol.Decode(e1, m2); err != nil {
		t.Fatalf("Decode of a re-encoding: %v\n%s", err, e1)
	}
	e2, err := protocol.Encode(m2)
	if err != nil {
		t.Fatalf("second Encode: %v", err)
	}
	if !bytes.Equal(e1, e2) {
		t.Fatalf("encoding is not a fixed point:\n%s\n%s", e1, e2)
	}
	b1, err := protocol.EncodeAs(m1, protocol.Binary)
	if err != nil {
		t.Fatalf("binary Encode of a decoded message: %v\n%q", err, data)
	}
	m3 := PT(new(T))
	if err := protocol.Decode(b1, m3); err != nil {
		t.Fatalf("Decode of a binary re-encoding: %v\n%q", err, b1)
	}
	b2, err := protocol.EncodeAs(m3, protocol.Binary)
	if err != nil {
		t.Fatalf("second binary Encode: %v", err)
	}
	if !bytes.Equal(b1, b2) {
		t.Fatalf("binary encoding is not a fixed point:\n%q\n%q", b1, b2)
	}
	normalize(m1)
	normalize(m2)
	normalize(m3)
	if !reflect.DeepEqual(m1, m2) {
		t.Fatalf("round trip changed the message:\n%#v\n%#v\ninput %q", m1, m2, data)
	}
	if !reflect.DeepEqual(m1, m3) {
		t.Fatalf("binary round trip changed the message:\n%#v\n%#v\ninput %q", m1, m3, data)
	}
}

func FuzzDecodeWakeup(f *testing.F) {
	fuzzDecode(f, []*protocol.Wakeup{validWakeup(), {Namespace: "名前", Queue: "<q&"}},
		`{"v":1,"ns":"a","queue":"b","at":"2024-01-01T00:00:00Z"}`,
		`{"v":1,"ns":"a","queue":"b"}`,
		`{"v":1,"ns":"a","queue":"b","at":null}`,
		`{"v":1,"ns":"a","queue":"b","at":"2024-01-01T00:00:00+00:00"}`,
		`{"v":1,"ns":"a","queue":"b","at":"2024-01-01T00:00:00.000000000Z"}`,
		`{"v":1,"ns":"a","queue":"b","at":"2024-01-01t00:00:00z"}`,
		`{"v":1,"ns":"\u00e9","queue":"\ud83d\ude42","at":"2024-01-01T00:00:00Z"}`,
		`{"v":1,"ns":"a b","queue":"b"}`,
		`{"v":1,"NS":"a","Queue":"b"}`,
	)
}

func FuzzDecodeRunFinished(f *testing.F) {
	fuzzDecode(f, []*protocol.RunFinished{validRunFinished()},
		`{"v":1,"ns":"a","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","status":"FAILED"}`,
		`{"v":1,"ns":"a","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","status":"RUNNING"}`,
		`{"v":1,"ns":"a","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","status":"C\u004fMPLETED"}`,
		`{"v":1,"ns":"a","run_id":"","status":"FAILED"}`,
		`{"v":1,"ns":"a","run_id":null,"status":"FAILED"}`,
	)
}

func FuzzDecodeCancel(f *testing.F) {
	fuzzDecode(f, []*protocol.Cancel{validCancel()},
		`{"v":1,"ns":"a","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002"}`,
		`{"v":1,"ns":"a","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001"}`,
	)
}

func FuzzDecodeScheduleChanged(f *testing.F) {
	m := validScheduleChanged()
	m.NextAt = nil
	fuzzDecode(f, []*protocol.ScheduleChanged{validScheduleChanged(), m},
		`{"v":1,"ns":"a","schedule_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","next_at":null}`,
		`{"v":1,"ns":"a","schedule_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","next_at":"0001-01-01T00:00:00Z"}`,
	)
}

func FuzzDecodeRelayUp(f *testing.F) {
	fuzzDecode(f, []*protocol.RelayUp{validRelayUp(), {RelayID: strings.Repeat("r", 200)}},
		`{"v":1,"relay_id":"x","at":"2024-01-01T00:00:00Z"}`,
		`{"v":1,"relay_id":"\u0000"}`,
		`{"v":1,"relay_id":"`+strings.Repeat("r", 201)+`"}`,
		`{"v":1,"relay_id":"`+strings.Repeat(`\u00e9`, 100)+`"}`,
		`{"v":1,"relay_id":"`+strings.Repeat(`\u00e9`, 101)+`"}`,
		`{"v":1,"relay_id":"\xff\xfe"}`,
	)
}

func FuzzDecodeWorkRequest(f *testing.F) {
	fuzzDecode(f, []*protocol.WorkRequest{validWorkRequest()},
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","credits":1,"types":[{"type":"T","version":""}],"seq":0,"wait_ms":0}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","credits":10001,"types":[{"type":"T"}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","credits":1,"types":[{"type":"T"},{"type":"T"}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","credits":1,"types":[{"type":"T","version":"1.0"}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","credits":1,"types":[],"wait_ms":600001}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","credits":1,"types":null,"seq":18446744073709551615}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","credits":-0,"types":[{"type":"T"}]}`,
	)
}

func FuzzDecodeDelivery(f *testing.F) {
	fuzzDecode(f, []*protocol.Delivery{validDelivery()},
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","seq":1,"runs":[{"run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","ns":"a","queue":"b","type":"T","version":"","attempt":1,"lease":1,"input":  { "a" : [ 1 , "<&>\u2028" ] } }]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","seq":1,"runs":[{"run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","ns":"a","queue":"b","type":"T","version":"","attempt":1,"lease":1,"input":null,"steps":[]}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","seq":1,"runs":[{"run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","ns":"a","queue":"b","type":"T","version":"","attempt":1,"lease":1,"input":"\xff","steps":[{"step_id":"s","status":"","attempt":1,"output":[ ]}]}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","seq":1,"runs":[{"run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","ns":"a","queue":"b","type":"T","version":"","attempt":1,"lease":1,"retry_policy":{"jitter":-1,"backoff_coefficient":1,"max_attempts":-1}}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","seq":1,"runs":[{"run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","ns":"a","queue":"b","type":"T","version":"","attempt":1,"lease":1,"retry_policy":{"jitter":2}}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","seq":1,"runs":[{"run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","ns":"a","queue":"b","type":"T","version":"","attempt":1,"lease":1,"retry_policy":{"initial_interval_ms":-1}}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","seq":1,"runs":[{"run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","ns":"a","queue":"b","type":"T","version":"","attempt":1,"lease":1,"retry_policy":null,"deadline_at":null}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","seq":1,"runs":[]}`,
	)
}

func FuzzDecodeDeliveryAck(f *testing.F) {
	fuzzDecode(f, []*protocol.DeliveryAck{validDeliveryAck(), {}},
		`{"v":1,"accepted":false}`, `{"v":1,"accepted":null}`, `{"v":1,"accepted":1}`, `{"accepted":true,"v":1}`,
	)
}

func FuzzDecodeReport(f *testing.F) {
	fuzzDecode(f, []*protocol.Report{validReport()},
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"run_completed","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"output": {"x" :"<\u2029>" , "y": 1.50e3 } }]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"step_completed","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"step_id":"s","attempt":1,"output":null}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"step_failed","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"step_id":"s","attempt":0}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"step_failed","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"step_id":"s","attempt":1,"step_kind":"LAMBDA"}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"run_exploded","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"run_sleep","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"until":null,"non_retryable":false,"output":"\ud800"}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"event_wait","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"step_id":"e","attempt":1,"name":"a.b","suspend":true}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"event_wait","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"step_id":"e","attempt":1,"name":"a b"}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"run_completed","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"name":"x"}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"child_start","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"step_id":"c","attempt":1,"child":{"type":"T","input":[1,{"a":null}]}}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"child_start","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"step_id":"c","attempt":1,"child":null}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"child_start","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"step_id":"c","attempt":1,"child":{"type":"T","x":1}}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"run_sleep","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"steps":["a",""],"events":true}]}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","items":[{"kind":"run_sleep","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0002","lease":1,"steps":null,"events":false}]}`,
	)
}

func FuzzDecodeReportReply(f *testing.F) {
	fuzzDecode(f, []*protocol.ReportReply{validReportReply(), {}, {Results: []protocol.ReportResult{}}},
		`{"v":1,"results":[{"code":"ok"},{"code":"nope"}]}`, `{"v":1,"results":[{}]}`, `{"v":1}`,
		`{"v":1,"results":[{"code":"ok","message":""}]}`, `{"v":1,"results":{}}`,
		`{"v":1,"results":[{"code":"ok","output":null}]}`, `{"v":1,"results":[{"code":"ok","output":{"a": [1, 2.50]}}]}`,
		`{"v":1,"results":[{"code":"ok","output":1,"waiting":true}]}`, `{"v":1,"results":[{"code":"error","waiting":true}]}`,
		`{"v":1,"results":[{"code":"ok","waiting":false}]}`,
	)
}

func FuzzDecodeWorkerRegister(f *testing.F) {
	fuzzDecode(f, []*protocol.WorkerRegister{validWorkerRegister()},
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","types":[{"type":"T","version":"v"}],"max_concurrency":1,"labels":{}}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","types":[{"type":"T","version":"v"}],"max_concurrency":1,"labels":{"a":"1","a":"2"}}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","types":[{"type":"T","version":"v"}],"max_concurrency":1,"labels":null,"pid":-1}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","types":[{"type":"T","version":"v"}],"max_concurrency":0}`,
	)
}

func FuzzDecodeHeartbeat(f *testing.F) {
	m := validHeartbeat()
	m.Runs = nil
	fuzzDecode(f, []*protocol.Heartbeat{validHeartbeat(), m},
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","runs":[],"sent_at":"2024-01-01T00:00:00Z"}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","runs":null,"draining":false,"sent_at":"2024-01-01T00:00:00Z"}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","sent_at":"0001-01-01T00:00:00Z"}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","sent_at":"0001-01-01T01:00:00+01:00"}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","queue":"b","runs":["00000000-0000-0000-0000-000000000000"],"sent_at":"2024-01-01T00:00:00Z"}`,
	)
}

func FuzzDecodeWorkerDeregister(f *testing.F) {
	fuzzDecode(f, []*protocol.WorkerDeregister{validWorkerDeregister()},
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a"}`,
		`{"v":1,"worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ns":"a","ns":""}`,
	)
}

func FuzzDecodePayloadRequest(f *testing.F) {
	fuzzDecode(f, []*protocol.PayloadRequest{validPayloadRequest()},
		`{"v":1,"ns":"a","run_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","lease":1,"offset":0,"length":1}`,
	)
}

func FuzzDecodePayloadChunk(f *testing.F) {
	fuzzDecode(f, []*protocol.PayloadChunk{validPayloadChunk()},
		`{"v":1,"code":"ok","data":"AAEC","total":3}`,
	)
}

// tokenSpec is ValidToken's documented contract, written independently.
func tokenSpec(s string) bool {
	if s == "" || len(s) > 200 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || strings.ContainsRune(".*>@", r) {
			return false
		}
	}
	return true
}

func FuzzValidToken(f *testing.F) {
	for _, s := range []string{"a", "default", token200, "名前", "\ufffd", "🙂", "$SYS", "<&"} {
		f.Add(s)
	}
	for _, c := range badTokens {
		f.Add(c.s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := protocol.ValidToken("token", s)
		if (err == nil) != tokenSpec(s) {
			t.Fatalf("ValidToken(%q) = %v, spec says valid=%v", s, err, tokenSpec(s))
		}
		w := &protocol.Wakeup{Namespace: s, Queue: s}
		b, encErr := protocol.Encode(w)
		if err != nil {
			if encErr == nil || !errors.Is(encErr, protocol.ErrInvalid) {
				t.Fatalf("Encode accepted invalid token %q: %v", s, encErr)
			}
			return
		}
		if encErr != nil {
			t.Fatalf("Encode refused valid token %q: %v", s, encErr)
		}
		// A valid token survives JSON and subjects unchanged.
		var got protocol.Wakeup
		if err := protocol.Decode(b, &got); err != nil || got.Namespace != s || got.Queue != s {
			t.Fatalf("token %q did not survive JSON: %q %q %v", s, got.Namespace, got.Queue, err)
		}
		for _, p := range parsers {
			subj := p.build(s, s)
			if n := strings.Count(subj, "."); n != 4 {
				t.Fatalf("subject %q has %d dots", subj, n)
			}
			ns, q, err := p.parse(subj)
			if err != nil || ns != s || q != s {
				t.Fatalf("%s: parse(%q) = %q %q %v", p.name, subj, ns, q, err)
			}
		}
	})
}

func fuzzParse(f *testing.F, root string) {
	var p = parsers[0]
	for _, c := range parsers {
		if c.name == root {
			p = c
		}
	}
	for _, c := range [][3]string{
		{p.build("ns", "q"), "ns", "q"},
		{p.build(token200, "q"), token200, "q"},
		{"kagzi.v1." + root + ".a.b.c", "a.b", "c"},
		{"kagzi.v1." + root + ".a b.c", "a b", "c"},
		{"kagzi.v1." + root + ".*.>", "*", ">"},
		{"kagzi.v1." + root + ".ns.", "ns", ""},
		{"kagzi.v1." + root + "..q", "", "q"},
		{"kagzi.v1." + root + ".\xff.q", "\xff", "q"},
		{"kagzi.v1." + root + ".名前.é", "名前", "é"},
		{protocol.SubjectReady("a", "b"), "a@b", "\u2028"},
		{protocol.SubjectWork("a", "b"), "a.", ".b"},
		{"kagzi.v1.", "", ""},
	} {
		f.Add(c[0], c[1], c[2])
	}
	f.Fuzz(func(t *testing.T, subject, ns, queue string) {
		// Parsing an arbitrary subject.
		gotNS, gotQ, err := p.parse(subject)
		if err != nil {
			if !errors.Is(err, protocol.ErrInvalid) || gotNS != "" || gotQ != "" {
				t.Fatalf("parse(%q) = %q %q %v", subject, gotNS, gotQ, err)
			}
		} else {
			if protocol.ValidToken("ns", gotNS) != nil || protocol.ValidToken("queue", gotQ) != nil {
				t.Fatalf("parse(%q) returned invalid tokens %q %q", subject, gotNS, gotQ)
			}
			if p.build(gotNS, gotQ) != subject {
				t.Fatalf("parse(%q) = %q %q, which builds %q", subject, gotNS, gotQ, p.build(gotNS, gotQ))
			}
			if _, _, err := p.other(subject); err == nil {
				t.Fatalf("both parsers accept %q", subject)
			}
		}
		// Building then parsing: succeeds exactly for valid tokens.
		subj := p.build(ns, queue)
		gotNS, gotQ, err = p.parse(subj)
		valid := protocol.ValidToken("ns", ns) == nil && protocol.ValidToken("queue", queue) == nil
		switch {
		case valid && (err != nil || gotNS != ns || gotQ != queue):
			t.Fatalf("parse(build(%q, %q)) = %q %q %v", ns, queue, gotNS, gotQ, err)
		case !valid && err == nil:
			t.Fatalf("parse(build(%q, %q)) accepted invalid tokens", ns, queue)
		}
	})
}

func FuzzParseReady(f *testing.F) { fuzzParse(f, "ready") }

func FuzzParseWork(f *testing.F) { fuzzParse(f, "work") }

func FuzzDecodeRegistrationNotice(f *testing.F) {
	fuzzDecode(f, []*protocol.RegistrationNotice{{Namespace: "a", WorkerID: id1}, {Namespace: "a", WorkerID: id2, Ask: true}},
		`{"v":1,"ns":"a","worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ask":false}`,
		`{"v":1,"ns":"a.b","worker_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","ask":true}`,
		`{"v":1,"ns":"a","worker_id":"00000000-0000-0000-0000-000000000000"}`,
	)
}

func FuzzDecodeReaperUp(f *testing.F) {
	fuzzDecode(f, []*protocol.ReaperUp{{ReaperID: id1}},
		`{"v":1,"reaper_id":"00000000-0000-0000-0000-000000000000"}`,
		`{"v":2,"reaper_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001"}`,
	)
}
