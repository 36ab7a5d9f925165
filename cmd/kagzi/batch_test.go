package main

import (
	"strings"
	"testing"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
)

// batch start resolves its runs and prints them; list, show and the state
// commands read and move it; bad input gets exit 2 (usage) or 1 (refused)
// and creates nothing. No reaper runs here: the batch stays pending.
func TestBatchCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	a := uuidRE.FindString(c.ok("run", "start", "Echo"))
	b := uuidRE.FindString(c.ok("run", "start", "Echo"))
	out := c.ok("batch", "start", "cancel", "--query", "type = 'Echo'", "--rate", "10")
	mustContain(t, "batch start", out, "Started batch", "cancel 2 runs at 10 runs/s")
	var started ops.BatchJSON
	c.okJSON(&started, "batch", "start", "terminate", "--ids", a+","+b, "--reason", "cleanup", "--by", "ops")
	if started.Total != 2 || started.Pending != 2 || started.State != "running" || started.Reason != "cleanup" || started.CreatedBy != "ops" {
		t.Fatalf("batch start --json: %+v", started)
	}
	var list []ops.BatchJSON
	c.okJSON(&list, "batch", "list")
	if len(list) != 2 || list[0].BatchID != started.BatchID {
		t.Fatalf("batch list: %+v", list)
	}
	mustContain(t, "batch show", c.ok("batch", "show", started.BatchID.String(), "--runs", "pending"), "0 done, 0 failed, 0 skipped, 2 pending of 2", a, b)
	mustContain(t, "batch pause", c.ok("batch", "pause", started.BatchID.String()), "is paused")
	mustContain(t, "batch resume", c.ok("batch", "resume", started.BatchID.String()), "is running")
	mustContain(t, "batch cancel", c.ok("batch", "cancel", started.BatchID.String()), "is cancelled")
	_, errOut := c.fails(cliutil.ExitFailed, "batch", "resume", started.BatchID.String())
	mustContain(t, "resume a cancelled batch", errOut, "it is cancelled")

	for _, bad := range []struct {
		code int
		args []string
		want string
	}{
		{cliutil.ExitUsage, []string{"batch", "start", "explode", "--query", "type = 'Echo'"}, "batch action"},
		{cliutil.ExitUsage, []string{"batch", "start", "cancel"}, "query"},
		{cliutil.ExitUsage, []string{"batch", "start", "cancel", "--query", "type = 'Echo'", "--ids", a}, "query"},
		{cliutil.ExitUsage, []string{"batch", "start", "cancel", "--query", "type ="}, "query"},
		{cliutil.ExitUsage, []string{"batch", "start", "cancel", "--query", "tpye = 'Echo'"}, "unknown field"},
		{cliutil.ExitUsage, []string{"batch", "start", "cancel", "--query", "type = 'Echo'", "--rate", "10001"}, "10000"},
		{cliutil.ExitUsage, []string{"batch", "start", "cancel", "--ids", "nope"}, "not a UUID"},
		{cliutil.ExitFailed, []string{"batch", "start", "cancel", "--query", "type = 'Nothing'"}, "matches no run"},
		{cliutil.ExitFailed, []string{"batch", "start", "retry", "--ids", a}, "is PENDING"},
		{cliutil.ExitFailed, []string{"batch", "show", a}, "not found"},
	} {
		_, errOut := c.fails(bad.code, bad.args...)
		if !strings.Contains(errOut, bad.want) {
			t.Errorf("%v: stderr %q, want %q", bad.args, errOut, bad.want)
		}
	}
	c.okJSON(&list, "batch", "list")
	if len(list) != 2 {
		t.Fatalf("a refused batch was created: %d batches", len(list))
	}
}

// The attribute batches take --attr, parsed by the declared kinds as run
// start's is, and --attr-name; delete takes finished runs only. A name not
// declared or a value of another kind is refused and creates nothing.
func TestBatchAttributeCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	c.ok("attribute", "declare", "incident", "keyword")
	c.ok("attribute", "declare", "customer", "int")
	a := uuidRE.FindString(c.ok("run", "start", "Echo", "--attr", "customer=1"))
	var set ops.BatchJSON
	c.okJSON(&set, "batch", "start", "set-attributes", "--ids", a, "--attr", "incident=INC-7", "--attr", "incident=INC-8", "--attr", "customer=42")
	if set.Action != "set-attributes" || set.Total != 1 || compactJSON(set.Payload) != `{"customer":42,"incident":["INC-7","INC-8"]}` {
		t.Fatalf("set-attributes batch: %+v (%s)", set, set.Payload)
	}
	mustContain(t, "batch show", c.ok("batch", "show", set.BatchID.String()), "set-attributes", `Attributes:`, `"INC-7"`)
	var rm ops.BatchJSON
	c.okJSON(&rm, "batch", "start", "remove-attributes", "--query", "type = 'Echo'", "--attr-name", "incident", "--attr-name", "customer")
	if rm.Total != 1 || compactJSON(rm.Payload) != `{"customer":null,"incident":null}` {
		t.Fatalf("remove-attributes batch: %+v (%s)", rm, rm.Payload)
	}
	for _, bad := range []struct {
		code int
		args []string
		want string
	}{
		{cliutil.ExitUsage, []string{"batch", "start", "set-attributes", "--ids", a, "--attr", "region=eu"}, "not declared"},
		{cliutil.ExitUsage, []string{"batch", "start", "set-attributes", "--ids", a, "--attr", "customer=x"}, "not a int value"},
		{cliutil.ExitUsage, []string{"batch", "start", "set-attributes", "--ids", a}, "needs the attributes"},
		{cliutil.ExitUsage, []string{"batch", "start", "remove-attributes", "--ids", a, "--attr-name", "region"}, "not declared"},
		{cliutil.ExitUsage, []string{"batch", "start", "cancel", "--ids", a, "--attr-name", "incident"}, "remove-attributes batch only"},
		{cliutil.ExitFailed, []string{"batch", "start", "delete", "--ids", a}, "is PENDING"},
		{cliutil.ExitFailed, []string{"batch", "start", "delete", "--query", "type = 'Echo'"}, "matches no run"},
	} {
		_, errOut := c.fails(bad.code, bad.args...)
		if !strings.Contains(errOut, bad.want) {
			t.Errorf("%v: stderr %q, want %q", bad.args, errOut, bad.want)
		}
	}
	var list []ops.BatchJSON
	c.okJSON(&list, "batch", "list")
	if len(list) != 2 {
		t.Fatalf("a refused batch was created: %d batches", len(list))
	}
}
