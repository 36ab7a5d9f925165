package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

func TestRunStartFlowFlags(t *testing.T) {
	t.Parallel()
	c := newCLI(t)

	// Debounce: the second start merges into the first's run.
	var s1, s2 startJSON
	c.okJSON(&s1, "run", "start", "Reindex", "--debounce-key", "catalog", "--debounce", "1h", "--input", `1`)
	c.okJSON(&s2, "run", "start", "Reindex", "--debounce-key", "catalog", "--debounce", "1h", "--input", `2`,
		"--debounce-keep", "first", "--debounce-max-wait", "2h")
	if !s1.Created || s2.Created || s1.RunID != s2.RunID {
		t.Fatalf("debounced starts: %+v, %+v", s1, s2)
	}
	out := c.ok("run", "start", "Reindex", "--debounce-key", "catalog", "--debounce", "1h")
	mustContain(t, "merged start", out, "Merged into debounced run "+s1.RunID, "catalog")

	// Id reuse: after a completed run, failed-only refuses with exit 1.
	st := c.store()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s3 startJSON
	c.okJSON(&s3, "run", "start", "Import", "--id", "import-7")
	claimed, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "Import"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	if err := st.RunsComplete(ctx, store.Lease{Namespace: "default", RunID: claimed[0].ID, Token: claimed[0].LeaseToken}, []byte("1")); err != nil {
		t.Fatal(err)
	}
	_, errOut := c.fails(cliutil.ExitFailed, "run", "start", "Import", "--id", "import-7", "--id-reuse", "failed-only")
	mustContain(t, "refused start", errOut, s3.RunID, "COMPLETED", "failed-only")
	var s4 startJSON
	c.okJSON(&s4, "run", "start", "Import", "--id", "import-7", "--id-reuse", "reject", "--id-reuse-window", "1ns")
	if !s4.Created || s4.RunID == s3.RunID {
		t.Fatalf("start after the window: %+v", s4)
	}
	var s5 startJSON
	c.okJSON(&s5, "run", "start", "Import", "--id", "import-7", "--id-reuse", "terminate")
	if !s5.Created {
		t.Fatalf("terminating start: %+v", s5)
	}
	if r, err := st.RunsGet(ctx, "default", uuid.MustParse(s4.RunID)); err != nil || r.Status != store.StatusCancelled {
		t.Fatalf("replaced run: %v %v", r.Status, err)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--debounce-key", "k"}, "--debounce window"},
		{[]string{"--debounce", "1s"}, "--debounce goes with --debounce-key"},
		{[]string{"--debounce-key", "k", "--debounce", "1s", "--debounce-keep", "middle"}, "--debounce-keep"},
		{[]string{"--debounce-key", "k", "--debounce", "1m", "--debounce-max-wait", "1s"}, "max wait"},
		{[]string{"--id-reuse", "sometimes", "--id", "x"}, "--id-reuse"},
		{[]string{"--id-reuse", "reject"}, "needs an external id"},
		{[]string{"--id", "x", "--id-reuse", "terminate", "--id-reuse-window", "1h"}, "window"},
	} {
		_, errOut := c.fails(cliutil.ExitUsage, append([]string{"run", "start", "T"}, tc.args...)...)
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("kagzi run start %v: stderr %q does not mention %q", tc.args, errOut, tc.want)
		}
	}
}
