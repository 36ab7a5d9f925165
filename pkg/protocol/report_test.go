package protocol_test

import (
	"testing"

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
