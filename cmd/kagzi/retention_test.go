package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
	"github.com/kagzi/kagzi/pkg/store"
)

func TestRetentionCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out := c.ok("retention", "show")
	mustContain(t, "retention show", out, "every namespace (default)", "7d", "30d", "namespace default", "7d (default)")

	var v ops.RetentionJSON
	c.okJSON(&v, "retention", "set", "--completed", "3d")
	if v.Own.Completed != (ops.PeriodJSON{Seconds: 3 * 86400, Text: "3d", From: "namespace"}) ||
		v.Own.Failed != (ops.PeriodJSON{Seconds: 30 * 86400, Text: "30d", From: "default"}) {
		t.Fatalf("namespace's completed period set: %+v", v.Own)
	}
	c.okJSON(&v, "retention", "set", "--type", "Report", "--completed", "1d12h", "--failed", "forever")
	if len(v.Types) != 1 || v.Types[0] != (ops.ScopeJSON{Type: "Report", Completed: ops.PeriodJSON{Seconds: 36 * 3600, Text: "1d12h", From: "type"},
		Failed: ops.PeriodJSON{Seconds: 0, Text: "forever", From: "type"}}) {
		t.Fatalf("type's periods set: %+v", v.Types)
	}
	out = c.ok("retention", "show")
	mustContain(t, "retention show", out, "namespace default", "3d", "30d (default)", "type Report", "1d12h", "forever")
	c.okJSON(&v, "retention", "set", "--all-namespaces", "--failed", "60d")
	if v.Default.Failed.Seconds != 60*86400 || v.Own.Failed.From != "default" || v.Own.Failed.Seconds != 60*86400 {
		t.Fatalf("default's failed period set: %+v", v)
	}
	// Another namespace sees the default only.
	c.okJSON(&v, "--namespace", "other", "retention", "show")
	if v.Own.Completed.Text != "7d" || v.Own.Failed.Text != "60d" || len(v.Types) != 0 {
		t.Fatalf("other namespace: %+v", v)
	}
	c.okJSON(&v, "retention", "remove", "--type", "Report")
	if len(v.Types) != 0 {
		t.Fatalf("type's periods removed: %+v", v.Types)
	}
	_, errOut := c.fails(cliutil.ExitFailed, "retention", "remove", "--type", "Report")
	mustContain(t, "remove twice", errOut, "not found")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"retention", "set"}, "give --completed, --failed or both"},
		{[]string{"retention", "set", "--completed", "5x"}, "--completed"},
		{[]string{"retention", "set", "--failed", "-3d"}, "--failed"},
		{[]string{"retention", "set", "--completed", "30s"}, "at least"},
		{[]string{"retention", "set", "--all-namespaces", "--type", "T", "--completed", "1d"}, "--type"},
		{[]string{"retention", "bogus"}, "unknown command"},
	} {
		_, errOut := c.fails(cliutil.ExitUsage, tc.args...)
		if !strings.Contains(errOut, tc.want) && !(tc.want == "at least" && strings.Contains(errOut, "1m to")) {
			t.Errorf("kagzi %s: stderr %q, want %q", strings.Join(tc.args, " "), errOut, tc.want)
		}
	}
}

// finishRun makes a run of typ with a step and an event and ends it in
// status, through the store as a worker and a client would.
func finishRun(t *testing.T, st *store.Store, typ string, status store.RunStatus) store.Run {
	t.Helper()
	ctx := context.Background()
	run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "default", Type: typ,
		Input: []byte(`{"order":1}`), ExternalID: "ext-" + uuid.NewString()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: typ}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != run.ID {
		t.Fatalf("claim: %v %v", got, err)
	}
	l := store.Lease{Namespace: "default", RunID: run.ID, Token: got[0].LeaseToken}
	if err := st.StepsRecord(ctx, store.StepsRecordParams{Lease: l, StepID: "charge", Attempt: 1, Kind: store.StepFunction,
		Status: store.StepCompleted, Output: []byte(`{"charged":true}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EventsSend(ctx, store.EventsSendParams{Namespace: "default", RunID: run.ID, Name: "paid", Payload: []byte(`{"amount":5}`)}); err != nil {
		t.Fatal(err)
	}
	if status == store.StatusFailed {
		err = st.RunsFail(ctx, l, "card declined")
	} else {
		err = st.RunsComplete(ctx, l, []byte(`{"ok":true}`))
	}
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.RunsGet(ctx, "default", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readExport decodes a JSON Lines export.
func readExport(t *testing.T, data string) []exportJSON {
	t.Helper()
	var out []exportJSON
	sc := bufio.NewScanner(strings.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e exportJSON
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestRunExport(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.store()
	done := finishRun(t, st, "Order", store.StatusCompleted)
	failed := finishRun(t, st, "Order", store.StatusFailed)
	other := finishRun(t, st, "Refund", store.StatusCompleted)
	var s startJSON
	c.okJSON(&s, "run", "start", "Order", "--input", `{"order":9}`) // live: PENDING

	// Every run, newest first, to standard output.
	out, errOut, code := c.run("run", "export")
	if code != 0 {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	mustContain(t, "export stderr", errOut, "Exported 4 run(s) to standard output")
	all := readExport(t, out)
	if len(all) != 4 || all[0].Run.RunID.String() != s.RunID || all[3].Run.RunID != done.ID {
		t.Fatalf("export of every run: %d lines, first %v, last %v", len(all), all[0].Run.RunID, all[len(all)-1].Run.RunID)
	}
	got := all[3]
	if compact(got.Run.Input) != `{"order":1}` || compact(got.Run.Output) != `{"ok":true}` || got.Run.Status != store.StatusCompleted ||
		got.Run.ExternalID != done.ExternalID {
		t.Fatalf("exported run: %+v", got.Run)
	}
	if len(got.Steps) != 1 || got.Steps[0].StepID != "charge" || compact(got.Steps[0].Output) != `{"charged":true}` {
		t.Fatalf("exported steps: %+v", got.Steps)
	}
	if len(got.Events) != 1 || got.Events[0].Name != "paid" || compact(got.Events[0].Payload) != `{"amount":5}` {
		t.Fatalf("exported events: %+v", got.Events)
	}

	// Filters as run list's, to a file.
	path := filepath.Join(t.TempDir(), "archive.jsonl")
	c.ok("run", "export", "--status", "COMPLETED,FAILED", "--type", "Order", "--output", path)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got2 := readExport(t, string(data))
	if len(got2) != 2 || got2[0].Run.RunID != failed.ID || got2[1].Run.RunID != done.ID || got2[0].Run.Error != "card declined" {
		t.Fatalf("COMPLETED,FAILED Order runs: %+v", got2)
	}

	// What finished before a time: the live run never; an age in the
	// future takes nothing.
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	got3 := readExport(t, c.ok("run", "export", "--finished-before", future))
	if len(got3) != 3 {
		t.Fatalf("finished before an hour from now: %d runs, want the 3 finished", len(got3))
	}
	if got4 := readExport(t, c.ok("run", "export", "--finished-before", "1d")); len(got4) != 0 {
		t.Fatalf("finished more than a day ago: %d runs", len(got4))
	}
	if got5 := readExport(t, c.ok("run", "export", "--queue", "default", "--type", "Refund")); len(got5) != 1 || got5[0].Run.RunID != other.ID {
		t.Fatalf("Refund runs: %+v", got5)
	}

	// Pages: more runs than a page are all written, once each.
	for i := 0; i < exportPage+3; i++ {
		if _, _, err := st.RunsCreate(context.Background(), store.RunsCreateParams{Namespace: "default", Queue: "default",
			Type: "Bulk", Input: fmt.Appendf(nil, "%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	bulk := readExport(t, c.ok("run", "export", "--type", "Bulk"))
	seen := map[uuid.UUID]bool{}
	for _, e := range bulk {
		seen[e.Run.RunID] = true
	}
	if len(bulk) != exportPage+3 || len(seen) != exportPage+3 {
		t.Fatalf("bulk export: %d lines, %d runs; want %d", len(bulk), len(seen), exportPage+3)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "export", "--finished-before", "yesterday"}, "--finished-before"},
		{[]string{"run", "export", "--status", "DONE"}, "not a run status"},
		{[]string{"run", "export", "--output", filepath.Join(t.TempDir(), "no", "such", "dir", "x.jsonl")}, "--output"},
	} {
		_, errOut := c.fails(cliutil.ExitUsage, tc.args...)
		mustContain(t, "stderr of kagzi "+strings.Join(tc.args, " "), errOut, tc.want)
	}
}
