package protocol_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
)

func TestRunProgressValidation(t *testing.T) {
	run := uuid.New()
	data, err := protocol.Encode(&protocol.RunProgress{Namespace: "ns", RunID: run, StepID: "stream:tokens#3"})
	if err != nil {
		t.Fatal(err)
	}
	var m protocol.RunProgress
	if err := protocol.Decode(data, &m); err != nil || m.RunID != run || m.StepID != "stream:tokens#3" {
		t.Fatalf("decode: %+v %v", m, err)
	}
	for _, bad := range []protocol.RunProgress{
		{Namespace: "ns", RunID: run, StepID: "charge"},
		{Namespace: "ns", StepID: "state:x"},
		{Namespace: "a.b", RunID: run, StepID: "state:x"},
	} {
		if _, err := protocol.Encode(&bad); !errors.Is(err, protocol.ErrInvalid) {
			t.Errorf("%+v: got %v, want ErrInvalid", bad, err)
		}
	}
	if got := protocol.SubjectProgress("ns", run); got != "kagzi.v1.progress.ns."+run.String() {
		t.Fatalf("subject %q", got)
	}
}
