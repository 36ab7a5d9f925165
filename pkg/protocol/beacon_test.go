package protocol_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
)

func validBeacon() *protocol.DispatcherBeacon {
	return &protocol.DispatcherBeacon{DispatcherID: id1, IntervalMS: 1000}
}

func beaconSuite() suite {
	type db = *protocol.DispatcherBeacon
	return msgSuite[protocol.DispatcherBeacon, db]{
		valid: validBeacon,
		variants: map[string]func() db{
			"leaving":      func() db { m := validBeacon(); m.Leaving = true; return m },
			"renew":        func() db { m := validBeacon(); m.Renew = true; return m },
			"relaying":     func() db { m := validBeacon(); m.RelayID = strings.Repeat("r", 200); return m },
			"min interval": func() db { m := validBeacon(); m.IntervalMS = 1; return m },
			"max interval": func() db { m := validBeacon(); m.IntervalMS = 60000; return m },
		},
		bad: []mutation[db]{
			{name: "nil id", mut: func(m db) { m.DispatcherID = uuid.Nil }},
			{name: "interval 0", mut: func(m db) { m.IntervalMS = 0 }},
			{name: "interval -1", mut: func(m db) { m.IntervalMS = -1 }},
			{name: "interval 60001", mut: func(m db) { m.IntervalMS = 60001 }},
			{name: "201-byte relay id", mut: func(m db) { m.RelayID = strings.Repeat("r", 201) }},
		},
		badWire: []wireEdit{
			{"interval as string", func(o map[string]any) { o["interval_ms"] = "1000" }},
			{"id as number", func(o map[string]any) { o["dispatcher_id"] = 1 }},
			{"leaving as string", func(o map[string]any) { o["leaving"] = "yes" }},
		},
	}
}

func TestDispatcherBeacon(t *testing.T) {
	s := beaconSuite()
	t.Run("round trip", s.roundTrip)
	t.Run("malformed", s.rejectMalformed)
	t.Run("invalid fields", s.rejectInvalidFields)
	if got := validBeacon().Interval(); got != time.Second {
		t.Errorf("interval %v, want 1s", got)
	}
	if got := protocol.BeaconSilence(time.Second); got != 3*time.Second {
		t.Errorf("silence %v, want 3s", got)
	}
}

func TestDispatcherProbe(t *testing.T) {
	type dp = *protocol.DispatcherProbe
	s := msgSuite[protocol.DispatcherProbe, dp]{
		valid: func() dp { return &protocol.DispatcherProbe{WorkerID: id1} },
		bad:   []mutation[dp]{{name: "nil worker id", mut: func(m dp) { m.WorkerID = uuid.Nil }}},
		badWire: []wireEdit{
			{"worker id as number", func(o map[string]any) { o["worker_id"] = 7 }},
			{"missing worker id", func(o map[string]any) { delete(o, "worker_id") }},
		},
	}
	t.Run("round trip", s.roundTrip)
	t.Run("malformed", s.rejectMalformed)
	t.Run("invalid fields", s.rejectInvalidFields)
}

func FuzzDecodeDispatcherBeacon(f *testing.F) {
	fuzzDecode(f, []*protocol.DispatcherBeacon{validBeacon(), {DispatcherID: id2, IntervalMS: 60000, Leaving: true}},
		`{"v":1,"dispatcher_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","interval_ms":0}`,
		`{"v":1,"dispatcher_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","interval_ms":1e3}`,
		`{"v":1,"dispatcher_id":"0b5c0f4e-7a5d-4c1e-9d33-6f2c1a8e0001","interval_ms":1000,"leaving":null}`,
	)
}
