package protocol_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/protocol"
)

func TestLeaderBeacon(t *testing.T) {
	type lb = *protocol.LeaderBeacon
	valid := func() lb { return &protocol.LeaderBeacon{Role: protocol.LeaderRelay, LeaderID: id1, IntervalMS: 1000} }
	s := msgSuite[protocol.LeaderBeacon, lb]{
		valid: valid,
		variants: map[string]func() lb{
			"reaper":       func() lb { m := valid(); m.Role = protocol.LeaderReaper; return m },
			"max interval": func() lb { m := valid(); m.IntervalMS = 60000; return m },
		},
		bad: []mutation[lb]{
			{name: "no role", mut: func(m lb) { m.Role = "" }},
			{name: "unknown role", mut: func(m lb) { m.Role = "scheduler" }},
			{name: "nil id", mut: func(m lb) { m.LeaderID = uuid.Nil }},
			{name: "interval 0", mut: func(m lb) { m.IntervalMS = 0 }},
			{name: "interval 60001", mut: func(m lb) { m.IntervalMS = 60001 }},
		},
		badWire: []wireEdit{
			{"interval as string", func(o map[string]any) { o["interval_ms"] = "1000" }},
			{"role as number", func(o map[string]any) { o["role"] = 1 }},
		},
	}
	t.Run("round trip", s.roundTrip)
	t.Run("malformed", s.rejectMalformed)
	t.Run("invalid fields", s.rejectInvalidFields)
	if got := valid().Interval(); got != time.Second {
		t.Errorf("interval %v, want 1s", got)
	}
	if got := protocol.SubjectLeaderBeacon(protocol.LeaderReaper); got != "kagzi.v1.leader.reaper" {
		t.Errorf("subject %q", got)
	}
}
