package main

import (
	"strings"
	"testing"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
)

// run pause and resume, queue and type pause: who and why are recorded
// and shown; a paused run is found by the query; a finished run, an
// unknown queue's resume and a reason above its maximum are refused.
func TestPauseCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	id := uuidRE.FindString(c.ok("run", "start", "Echo"))
	out := c.ok("run", "pause", id, "--reason", "vendor outage", "--by", "oncall")
	mustContain(t, "run pause", out, "Paused run "+id)
	var p runPauseJSON
	c.okJSON(&p, "run", "pause", id)
	if p.Changed || p.Paused == nil || p.Paused.By != "oncall" {
		t.Fatalf("second pause: %+v", p)
	}
	out = c.ok("run", "show", id)
	mustContain(t, "run show", out, "Paused:", "by oncall: vendor outage", "Waiting:", "paused by oncall")
	var shown struct {
		Paused  *cliutil.PauseJSON `json:"paused"`
		Waiting *struct{ Reason string }
	}
	c.okJSON(&shown, "run", "show", id)
	if shown.Paused == nil || shown.Paused.Reason != "vendor outage" || shown.Waiting == nil || shown.Waiting.Reason != "paused" {
		t.Fatalf("run show --json: %+v", shown)
	}
	mustContain(t, "run list --query", c.ok("run", "list", "--query", "paused = true"), id, "PENDING (paused)")
	other := uuidRE.FindString(c.ok("run", "start", "Echo"))
	if line := lineWith(c.ok("run", "list"), other); !strings.Contains(line, "PENDING") || strings.Contains(line, "paused") {
		t.Fatalf("run list marks a run that is not paused: %q", line)
	}
	var page runsPage
	c.okJSON(&page, "run", "list")
	for _, r := range page.Runs {
		if (r.RunID.String() == id) != (r.Paused != nil) || (r.Paused != nil && r.Paused.By != "oncall") {
			t.Fatalf("run list --json: run %s paused %+v", r.RunID, r.Paused)
		}
	}
	mustContain(t, "run list --paused", c.ok("run", "list", "--paused", "--query", "type = 'Echo'"), id)
	c.okJSON(&p, "run", "resume", id)
	if !p.Changed || p.DueAt == nil {
		t.Fatalf("resume: %+v", p)
	}
	if out := c.ok("run", "list", "--query", "paused = true"); strings.Contains(out, id) {
		t.Fatalf("a resumed run listed as paused: %s", out)
	}
	if line := lineWith(c.ok("run", "list"), id); strings.Contains(line, "paused") {
		t.Fatalf("run list marks a resumed run: %q", line)
	}
	mustContain(t, "run resume again", c.ok("run", "resume", id), "is not paused")
	_, errOut := c.fails(cliutil.ExitUsage, "run", "pause", id, "--reason", strings.Repeat("x", 1025))
	mustContain(t, "run pause with a long reason", errOut, "at most 1024")
	c.ok("run", "cancel", id)
	_, errOut = c.fails(cliutil.ExitFailed, "run", "pause", id)
	mustContain(t, "run pause of a finished run", errOut, "finished")

	mustContain(t, "queue pause", c.ok("queue", "pause", "orders", "--by", "ops"), "Paused the task queue orders")
	mustContain(t, "type pause", c.ok("type", "pause", "Echo", "--reason", "bad deploy"), "Paused the workflow type Echo")
	var qs []ops.PausedJSON
	c.okJSON(&qs, "queue", "paused")
	if len(qs) != 1 || qs[0].Name != "orders" || qs[0].By != "ops" {
		t.Fatalf("queue paused: %+v", qs)
	}
	mustContain(t, "workflow paused", c.ok("workflow", "paused"), "Echo", "bad deploy")
	c.ok("queue", "resume", "orders")
	c.ok("workflow", "resume", "Echo")
	c.fails(cliutil.ExitFailed, "queue", "resume", "orders")
}

// lineWith is the line of out that holds s ("" if none).
func lineWith(out, s string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}

// run retry-step checks its retry options before anything else (exit 2)
// and refuses a run that backs off before no step (exit 1).
func TestRetryStepCommandOptions(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	id := uuidRE.FindString(c.ok("run", "start", "Echo"))
	for _, bad := range [][]string{
		{"--max-attempts", "0"},
		{"--max-attempts", "10001"},
		{"--initial-interval", "721h"},
		{"--max-interval", "-1s"},
		{"--initial-interval", "1m", "--max-interval", "1s"},
		{"--backoff", "0.5"},
		{"--backoff", "101"},
	} {
		_, errOut := c.fails(cliutil.ExitUsage, append([]string{"run", "retry-step", id}, bad...)...)
		// The flag, or the option it sets, is named.
		flag := strings.TrimLeft(bad[0], "-")
		if !strings.Contains(errOut, flag) && !strings.Contains(errOut, strings.ReplaceAll(flag, "-", " ")) {
			t.Errorf("run retry-step %s: %s names neither %s nor its option", strings.Join(bad, " "), errOut, flag)
		}
	}
	_, errOut := c.fails(cliutil.ExitFailed, "run", "retry-step", id, "--max-attempts", "5", "--initial-interval", "10ms")
	mustContain(t, "run retry-step of a pending run", errOut, "backs off before no step")
}
