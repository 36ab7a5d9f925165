package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

func TestTermSafeEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := cliutil.NewTermSafe(&b)
	// A C1 CSI (U+009B) cut between two writes, DEL, a stray byte, and
	// what must pass: text, newline, tab, other UTF-8.
	for _, p := range []string{"a\x1b[2Jb\r\a\x7f\tü\n", "x\xc2", "\x9b31m€", "\xff", "\xe2\x82"} {
		if n, err := w.Write([]byte(p)); err != nil || n != len(p) {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	want := `a\u001b[2Jb\u000d\u0007\u007f` + "\tü\n" + `x\u009b31m€\xff\xe2\x82`
	if b.String() != want {
		t.Fatalf("escaped %q, want %q", b.String(), want)
	}
	// JSON stays JSON: the escapes are JSON's.
	b.Reset()
	_, _ = cliutil.NewTermSafe(&b).Write([]byte("{\"e\": \"\x7f\u009b\"}"))
	var v map[string]string
	if err := json.Unmarshal(b.Bytes(), &v); err != nil || v["e"] != "\x7f\u009b" {
		t.Fatalf("JSON through cliutil.TermSafe: %q → %v %q", b.String(), err, v["e"])
	}
}

// Nothing the CLI prints holds a terminal control sequence: not a field
// (an error a workflow recorded), not an error message; an external id
// with one is refused; a name echoed in an error is cut.
func TestCLIOutputIsSafeForATerminal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	raw := func(what, s string) {
		t.Helper()
		if strings.ContainsAny(s, "\x1b\x07\r\u009b") {
			t.Errorf("%s prints a raw control character: %q", what, s)
		}
	}

	_, errOut := c.fails(cliutil.ExitUsage, "run", "start", "Echo", "--id", "a\x1b[2Jb")
	mustContain(t, "external id with an escape", errOut, "control character")
	raw("the refused external id", errOut)

	long := strings.Repeat("T", 100<<10)
	_, errOut = c.fails(cliutil.ExitUsage, "run", "start", long)
	if len(errOut) > 1000 || !strings.Contains(errOut, strings.Repeat("T", 99)+"…") {
		t.Errorf("a 100 KB type name is echoed whole or not cut to 100 characters (%d bytes):\n%.500s", len(errOut), errOut)
	}
	_, errOut = c.fails(cliutil.ExitUsage, "event", "send", uuid.NewString(), strings.Repeat("e", 100<<10))
	if len(errOut) > 1000 {
		t.Errorf("a 100 KB event name is echoed whole (%d bytes)", len(errOut))
	}

	// A workflow's error with escapes, shown by run show and run list.
	st := c.store()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, _, err := st.RunsCreate(ctx, store.RunsCreateParams{Namespace: "default", Queue: "default", Type: "Echo"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "Echo"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v %v", got, err)
	}
	l := store.Lease{Namespace: "default", RunID: run.ID, Token: got[0].LeaseToken}
	if err := st.RunsFail(ctx, l, "boom\x1b]0;owned\x07\x1b[2J\r\u009b"); err != nil {
		t.Fatal(err)
	}
	out := c.ok("run", "show", run.ID.String())
	raw("run show", out)
	mustContain(t, "run show", out, `boom\u001b]0;owned\u0007`)
	raw("run show --json", c.ok("--json", "run", "show", run.ID.String()))
	var v runShowJSON
	c.okJSON(&v, "run", "show", run.ID.String())
	if v.Error != "boom\x1b]0;owned\x07\x1b[2J\r\u009b" {
		t.Errorf("--json must still carry the error, escaped as JSON: %q", v.Error)
	}
}
