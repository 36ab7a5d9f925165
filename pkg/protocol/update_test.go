package protocol_test

import (
	"strings"
	"testing"

	"github.com/kagzi/kagzi/pkg/protocol"
)

func TestUpdateNames(t *testing.T) {
	for _, ok := range []string{"AddItem", "cart.add", strings.Repeat("x", protocol.MaxUpdateNameLen)} {
		if err := protocol.ValidUpdateName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
		// The longest step derived from it fits a step id.
		if id, _ := protocol.UpdateStepID("event:" + protocol.UpdateEventName(ok) + "#4294967295"); len("event:"+protocol.UpdateEventName(ok)+"#4294967295") > protocol.MaxNameLen || !protocol.IsProgressStep(id) {
			t.Errorf("%q: derived step ids too long or not progress", ok)
		}
	}
	for _, bad := range []string{"", "a#b", "has space", "a*", strings.Repeat("x", protocol.MaxUpdateNameLen+1)} {
		if err := protocol.ValidUpdateName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for in, want := range map[string]string{
		"event:update.AddItem":    "update:AddItem",
		"event:update.AddItem#12": "update:AddItem#12",
		"event:AddItem":           "",
		"event:update.":           "",
		"update:AddItem":          "",
	} {
		if got, ok := protocol.UpdateStepID(in); got != want || ok != (want != "") {
			t.Errorf("UpdateStepID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

func TestDecodeUpdateAnswer(t *testing.T) {
	for in, ok := range map[string]bool{
		`{"result":1}`:                   true,
		`{"result":null}`:                true,
		`{"error":"no","type":"T"}`:      true,
		`{"error":"no","rejected":true}`: true,
		`{}`:                             false,
		`{"result":1,"extra":2}`:         false,
		`1`:                              false,
	} {
		if _, err := protocol.DecodeUpdateAnswer([]byte(in)); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", in, err, ok)
		}
	}
}
