package protocol_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
)

// An attributes_set item names a step of its own prefix and carries a
// JSON object.
func TestReportAttributesSetValidates(t *testing.T) {
	base := func() protocol.Report {
		return protocol.Report{WorkerID: uuid.New(), Namespace: "ns", Items: []protocol.ReportItem{{Kind: protocol.ReportAttributesSet, RunID: uuid.New(),
			LeaseToken: 1, StepID: protocol.AttributesStepID(1), Attempt: 1, Output: []byte(`{"customer":"42"}`)}}}
	}
	r := base()
	if err := r.Validate(); err != nil {
		t.Fatalf("a valid item: %v", err)
	}
	for what, change := range map[string]func(*protocol.ReportItem){
		"another step id": func(it *protocol.ReportItem) { it.StepID = "s1" },
		"not an object":   func(it *protocol.ReportItem) { it.Output = []byte(`[1]`) },
		"no output":       func(it *protocol.ReportItem) { it.Output = nil },
		"no attempt":      func(it *protocol.ReportItem) { it.Attempt = 0 },
	} {
		r := base()
		change(&r.Items[0])
		if err := r.Validate(); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
}

// A wait_token_mint item names a step of its own prefix, attempt 1, and
// carries its expiry.
func TestReportWaitTokenMintValidates(t *testing.T) {
	base := func() protocol.Report {
		until := time.Now().Add(time.Hour)
		return protocol.Report{WorkerID: uuid.New(), Namespace: "ns", Items: []protocol.ReportItem{{Kind: protocol.ReportWaitTokenMint,
			RunID: uuid.New(), LeaseToken: 1, StepID: protocol.WaitTokenStepID("approval", 2), Attempt: 1, Until: &until}}}
	}
	r := base()
	if err := r.Validate(); err != nil {
		t.Fatalf("a valid item: %v", err)
	}
	if got := protocol.WaitTokenStepID("approval", 1); got != "token:approval" {
		t.Errorf("first step id %q", got)
	}
	for what, change := range map[string]func(*protocol.ReportItem){
		"another step id": func(it *protocol.ReportItem) { it.StepID = "s1" },
		"no expiry":       func(it *protocol.ReportItem) { it.Until = nil },
		"attempt 2":       func(it *protocol.ReportItem) { it.Attempt = 2 },
		"a name":          func(it *protocol.ReportItem) { it.Name = "x" },
	} {
		r := base()
		change(&r.Items[0])
		if err := r.Validate(); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
}
