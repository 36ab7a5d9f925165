package protocol_test

import (
	"testing"

	"github.com/kagzi/kagzi/pkg/protocol"
)

func TestProgressStepIDs(t *testing.T) {
	cases := []struct {
		id           string
		prefix, name string
		n            int
		end, ok      bool
	}{
		{protocol.StateStepID("progress", 1), protocol.StatePrefix, "progress", 1, false, true},
		{protocol.StreamStepID("tok", 10), protocol.StreamPrefix, "tok", 10, false, true},
		{protocol.StreamEndStepID("tok"), protocol.StreamPrefix, "tok", 0, true, true},
		{"state:progress#end", "", "", 0, false, false},
		{"stream:tok#0", "", "", 0, false, false},
		{"stream:tok#01", "", "", 0, false, false},
		{"stream:tok", "", "", 0, false, false},
		{"stream:#1", "", "", 0, false, false},
		{"side:x#2", "", "", 0, false, false},
	}
	for _, c := range cases {
		prefix, name, n, end, ok := protocol.ParseProgressStepID(c.id)
		if prefix != c.prefix || name != c.name || n != c.n || end != c.end || ok != c.ok {
			t.Errorf("%q: %q %q %d %v %v", c.id, prefix, name, n, end, ok)
		}
	}
	for _, bad := range []string{"", "a#b", "a.b", "a b"} {
		if protocol.ValidProgressName("key", bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if !protocol.IsProgressStep(protocol.StateStepID("k", 1)) || !protocol.IsProgressStep(protocol.StreamEndStepID("s")) {
		t.Error("state and stream steps are progress steps")
	}
}
