package protocol_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/retry"
)

// The binary form is a wire contract: processes of two releases exchange
// it during a rolling upgrade. The golden files hold what a released
// codec wrote for a corpus of messages, and what it made of damaged
// copies of them; the codec of today must agree byte for byte.
//
// Rewrite them (-update-golden) only to add messages or fields, never to
// accept a change to bytes already there.
var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/binary_*.golden from the current codec")

const (
	encodeGolden = "testdata/binary_encode.golden"
	decodeGolden = "testdata/binary_decode.golden"
)

type goldenCase struct {
	name string
	msg  protocol.Message
	// into returns an empty message of msg's type to decode into.
	into func() protocol.Message
}

func goldenCorpus() []goldenCase {
	wr := func() protocol.Message { return &protocol.WorkRequest{} }
	dl := func() protocol.Message { return &protocol.Delivery{} }
	ack := func() protocol.Message { return &protocol.DeliveryAck{} }
	rep := func() protocol.Message { return &protocol.Report{} }
	rr := func() protocol.Message { return &protocol.ReportReply{} }

	east := time.FixedZone("", 5*3600+30*60)
	west := time.FixedZone("", -(9*3600 + 45*60))
	ancient := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	late := time.Date(9999, 12, 31, 23, 59, 59, 999999999, west)

	big := validDelivery()
	big.Runs[0].Input = json.RawMessage(`"` + strings.Repeat("x", 300) + `"`)
	big.Runs[0].Steps[0].Output = json.RawMessage(`"` + strings.Repeat("y", 20000) + `"`)
	big.Runs[0].RetryPolicy = &retry.Policy{MaxAttempts: -1, BackoffCoefficient: 1.5, Jitter: -1,
		NonRetryable: []string{"A", "B", "C"}, InitialIntervalMS: 10, MaxIntervalMS: 1 << 40}

	zoned := validDelivery()
	zoned.Runs[0].DeadlineAt = tp(t1.In(east))
	zoned.Runs[0].AvailableAt = tp(ancient)
	zoned.Runs[0].CancelRequestedAt = tp(late)
	zoned.Runs[0].Steps[1].RetryAt = tp(time.Unix(-1, 5).In(west))
	zoned.Runs[0].Steps[0].NonRetryable = true
	zoned.Runs[0].RetryPolicy = &retry.Policy{}
	zoned.Seq = 1<<64 - 1
	zoned.Limits = protocol.PayloadLimits{WarnBytes: 1, MaxBytes: 1 << 40}

	// A failing step given new retry options (RetryStepNow).
	override := validDelivery()
	override.Runs[0].Steps[1].RetryOverride = &retry.Policy{MaxAttempts: 5, BackoffCoefficient: 1.5,
		InitialIntervalMS: 10, MaxIntervalMS: 1000}

	minimal := &protocol.Delivery{WorkerID: id1, Limits: protocol.PayloadLimits{WarnBytes: 1, MaxBytes: 1},
		Runs: []protocol.DeliveredRun{{RunID: id2, Namespace: "n", Queue: "q", Type: "T", Attempt: 1, LeaseToken: 1}}}

	utf := validReport()
	utf.Items[0].Error = "bad \xff byte, 名前 🙂"
	utf.Items[3].Error = strings.Repeat("é", 200)
	utf.Items[7].Child.RetryPolicy = &retry.Policy{MaxAttempts: 1, BackoffCoefficient: 2, Jitter: 0.2,
		NonRetryable: []string{"X"}, InitialIntervalMS: 1, MaxIntervalMS: 2}
	utf.Items[7].Child.ParentClosePolicy = "ABANDON"
	utf.Items[7].Child.Priority = -4

	maxWR := validWorkRequest()
	maxWR.Credits = protocol.MaxCredits
	maxWR.WaitMS = 0
	maxWR.Seq = 0
	maxWR.Types = []protocol.TypeVersion{{Type: "T"}, {Type: "T", Version: "v2"}, {Type: token200, Version: token200}}

	// The messages of one one-step run, as BenchmarkWire sends them.
	benchDelivery := &protocol.Delivery{WorkerID: id1, Seq: 42, Limits: protocol.PayloadLimits{WarnBytes: 1 << 20, MaxBytes: 2 << 20},
		Runs: []protocol.DeliveredRun{{RunID: id2, Namespace: "bench", Queue: "bench", Type: "noop", Attempt: 1, LeaseToken: 7,
			Input: json.RawMessage(`{"n":1}`), RetryPolicy: &retry.Policy{MaxAttempts: 5, InitialIntervalMS: 1000, MaxIntervalMS: 60000},
			TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", AvailableAt: tp(t0)}}}
	benchReport := &protocol.Report{WorkerID: id1, Namespace: "bench", Items: []protocol.ReportItem{
		{Kind: protocol.ReportStepCompleted, RunID: id2, LeaseToken: 7, StepID: "s0", StepKind: "FUNCTION", Attempt: 1,
			Output: json.RawMessage(`1`), StartedAt: tp(t0), FinishedAt: tp(t1)},
		{Kind: protocol.ReportRunCompleted, RunID: id2, LeaseToken: 7, Output: json.RawMessage(`{"n":1}`)}}}

	return []goldenCase{
		{"work_request", validWorkRequest(), wr},
		{"work_request_max", maxWR, wr},
		{"delivery", validDelivery(), dl},
		{"delivery_big", big, dl},
		{"delivery_zoned", zoned, dl},
		{"delivery_minimal", minimal, dl},
		{"delivery_override", override, dl},
		{"delivery_bench", benchDelivery, dl},
		{"ack", validDeliveryAck(), ack},
		{"ack_refused", &protocol.DeliveryAck{}, ack},
		{"report", validReport(), rep},
		{"report_utf8", utf, rep},
		{"report_bench", benchReport, rep},
		{"report_reply", validReportReply(), rr},
		{"report_reply_empty", &protocol.ReportReply{}, rr},
		{"report_reply_cancel", &protocol.ReportReply{Results: []protocol.ReportResult{
			{Code: protocol.ResultOK, CancelRequested: true}, {Code: protocol.ResultOK, Output: json.RawMessage(`[]`), CancelRequested: true}}}, rr},
	}
}

// damaged returns variants of a valid encoding b: the fuzz seeds, and
// random flips, insertions, deletions and truncations from a fixed seed.
func damaged(name string, b []byte) [][]byte {
	out := binarySeedsFrom(b)
	// Every field twice: repeated fields append, nested ones merge or
	// replace, scalars take the last.
	out = append(out, append(bytes.Clone(b), b[3:]...))
	var seed [32]byte
	copy(seed[:], name)
	rng := rand.New(rand.NewChaCha8(seed))
	for range 60 {
		c := bytes.Clone(b)
		for range 1 + rng.IntN(3) {
			i := rng.IntN(len(c))
			switch rng.IntN(4) {
			case 0:
				c[i] ^= byte(1 + rng.IntN(255))
			case 1:
				c = append(c[:i], append([]byte{byte(rng.IntN(256))}, c[i:]...)...)
			case 2:
				if len(c) > 1 {
					c = append(c[:i], c[i+1:]...)
				}
			case 3:
				c = c[:max(i, 1)]
			}
		}
		out = append(out, c)
	}
	return out
}

// decodeOutcome is what Decode makes of data: "invalid", or the binary
// and JSON encodings of the message it accepted.
func decodeOutcome(data []byte, into protocol.Message) string {
	if err := protocol.Decode(data, into); err != nil {
		return "invalid"
	}
	b, err := protocol.EncodeAs(into, protocol.Binary)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	j, err := protocol.Encode(into)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	return hex.EncodeToString(b) + " " + hex.EncodeToString(j)
}

func goldenLines(t *testing.T) (enc, dec []string) {
	t.Helper()
	for _, c := range goldenCorpus() {
		b, err := protocol.EncodeAs(c.msg, protocol.Binary)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		enc = append(enc, c.name+" "+hex.EncodeToString(b))
		if len(b) > 4096 {
			continue
		}
		for i, d := range damaged(c.name, b) {
			dec = append(dec, fmt.Sprintf("%s#%d %s %s", c.name, i, hex.EncodeToString(d), decodeOutcome(d, c.into())))
		}
	}
	return enc, dec
}

func readGolden(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func writeGolden(t *testing.T, path string, lines []string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBinaryGolden: the codec writes the corpus as the golden file holds
// it, and decodes damaged copies as the released codec did.
func TestBinaryGolden(t *testing.T) {
	enc, dec := goldenLines(t)
	if *updateGolden {
		writeGolden(t, encodeGolden, enc)
		writeGolden(t, decodeGolden, dec)
		return
	}
	for path, got := range map[string][]string{encodeGolden: enc, decodeGolden: dec} {
		want := readGolden(t, path)
		if len(got) != len(want) {
			t.Errorf("%s: %d lines, want %d", path, len(got), len(want))
		}
		for i := range min(len(got), len(want)) {
			if got[i] != want[i] {
				name, _, _ := strings.Cut(want[i], " ")
				t.Errorf("%s: %s differs:\n got %.300s\nwant %.300s", path, name, got[i], want[i])
			}
		}
	}
}
