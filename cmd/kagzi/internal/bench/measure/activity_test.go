package measure

import (
	"testing"
	"time"
)

func TestRound(t *testing.T) {
	if Round2(1.005001) != 1.01 || Round2(-2.344) != -2.34 || Round3(0.16249) != 0.162 {
		t.Error("rounding")
	}
}

func TestActivitySampler(t *testing.T) {
	a := NewActivitySampler(nil, "db", "kagzi-bench")
	at := func(ms int) *time.Time {
		x := time.Unix(0, int64(ms)*int64(time.Millisecond))
		return &x
	}
	// The first sample is the baseline; a statement counts when its
	// backend's query_start moves.
	a.add([]Backend{{PID: 1, ApplicationName: "kagzi-reaper", QueryStart: at(1), Query: "SELECT 1"}}, true)
	a.add([]Backend{{PID: 1, ApplicationName: "kagzi-reaper", QueryStart: at(1), Query: "SELECT 1"}}, false)
	a.add([]Backend{
		{PID: 1, ApplicationName: "kagzi-reaper", QueryStart: at(5), Query: "\nSELECT min(lease_expires_at) FROM kagzi.workflow_runs WHERE status = 'RUNNING'"},
		{PID: 2, ApplicationName: "kagzi-dispatcher", QueryStart: at(6), Query: "begin"},
		{PID: 3, ApplicationName: "kagzi-bench", QueryStart: at(7), Query: "SELECT 2"},
	}, false)
	got := a.Observed()
	if len(got) != 2 {
		t.Fatalf("observed %+v", got)
	}
	want := map[string]string{"kagzi-reaper": "next lease expiry (RunsNextLeaseExpiry)", "kagzi-dispatcher": "begin"}
	for _, o := range got {
		if o.Count != 1 || want[o.Service] != o.Statement {
			t.Errorf("observed %+v", o)
		}
	}
}

func TestStatementName(t *testing.T) {
	for sql, want := range map[string]string{
		"BEGIN":   "begin",
		" commit": "commit",
		"-- ping": "pool health ping (pgxpool, after 1 s idle)",
		"\nWITH lim AS (\n\tSELECT l.workflow_type, kagzi.claim_slots(l.namespace_id)":    "claim (RunsClaim)",
		"SELECT something quite long that no rule knows about, and goes on and on and on": "SELECT something quite long that no rule knows about, and goes on and …",
	} {
		if got := StatementName(sql); got != want {
			t.Errorf("StatementName(%q) = %q, want %q", sql, got, want)
		}
	}
}

func TestWithApp(t *testing.T) {
	if got := WithApp("postgres://u@h:5432/db?sslmode=disable", "kagzi-reaper"); got != "postgres://u@h:5432/db?application_name=kagzi-reaper&sslmode=disable" {
		t.Errorf("url form: %s", got)
	}
	if got := WithApp("postgres://u@h/db", "a"); got != "postgres://u@h/db?application_name=a" {
		t.Errorf("url form without query: %s", got)
	}
	if got := WithApp("host=h dbname=db", "a"); got != "host=h dbname=db application_name=a" {
		t.Errorf("keyword form: %s", got)
	}
}

func TestPct(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, c := range []struct{ p, want float64 }{{50, 5}, {99, 10}, {100, 10}, {10, 1}, {0, 1}} {
		if got := Pct(xs, c.p); got != c.want {
			t.Errorf("Pct(%v) = %v, want %v", c.p, got, c.want)
		}
	}
	if Pct(nil, 50) != 0 || xs[0] != 5 {
		t.Error("empty input must give 0, and the input stays unsorted")
	}
}
