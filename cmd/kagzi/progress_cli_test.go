//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/pkg/store"
)

// TestRunExportProgress: `run export` draws its progress line on a
// terminal's standard error only. Standard error a file or a buffer, the
// output is the same as ever; a pseudo-terminal (opened by hand:
// /dev/ptmx) gets the line, ended by a newline before the summary;
// KAGZI_PROGRESS=1 forces it where there is no terminal, 0 hides it, any
// other value is a usage error. Not parallel: it sets KAGZI_PROGRESS.
func TestRunExportProgress(t *testing.T) {
	c := newCLI(t)
	st := c.store()
	for _, s := range []store.RunStatus{store.StatusCompleted, store.StatusFailed, store.StatusCompleted} {
		finishRun(t, st, "Order", s)
	}
	// The line's total counts what the export's filter selects.
	later := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		p    store.RunsExportParams
		want int64
	}{
		{store.RunsExportParams{}, 3},
		{store.RunsExportParams{Statuses: []store.RunStatus{store.StatusFailed}, Type: "Order", FinishedBefore: &later}, 1},
		{store.RunsExportParams{Statuses: []store.RunStatus{store.StatusCompleted}, Queue: "it's none"}, 0},
	} {
		q := exportQuery(tc.p)
		total, _, err := st.RunsCountQuery(context.Background(), "default", q, "")
		if err != nil || total != tc.want {
			t.Fatalf("count %q: %d, %v; want %d", q, total, err, tc.want)
		}
	}
	args := []string{"--database-url", c.url, "run", "export", "--output", os.DevNull}
	run := func(stderr io.Writer) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		return execute(ctx, args, strings.NewReader(""), io.Discard, stderr)
	}
	const line = "exporting runs: 3 in "

	// Standard error a file: no terminal, no line.
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	if code := run(f); code != 0 {
		t.Fatalf("export: exit %d", code)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := string(b); strings.Contains(got, "exporting runs") || strings.Contains(got, "\r") || !strings.Contains(got, "Exported 3 run(s)") {
		t.Fatalf("stderr a file: %q, want the summary alone", got)
	}

	var buf bytes.Buffer
	t.Setenv(cliutil.ProgressEnv, "1")
	if code := run(&buf); code != 0 || !strings.Contains(buf.String(), "\r"+line) {
		t.Fatalf("%s=1: exit %d, stderr %q, want %q", cliutil.ProgressEnv, code, buf.String(), line)
	}
	buf.Reset()
	t.Setenv(cliutil.ProgressEnv, "0")
	if code := run(&buf); code != 0 || strings.Contains(buf.String(), "exporting runs") {
		t.Fatalf("%s=0: exit %d, stderr %q, want no line", cliutil.ProgressEnv, code, buf.String())
	}
	buf.Reset()
	t.Setenv(cliutil.ProgressEnv, "yes")
	if code := run(&buf); code != cliutil.ExitUsage || !strings.Contains(buf.String(), cliutil.ProgressEnv) {
		t.Fatalf("%s=yes: exit %d, stderr %q, want a usage error naming it", cliutil.ProgressEnv, code, buf.String())
	}

	// A terminal (a pseudo-terminal; skipped where there is none): the
	// line, then the summary on a line of its own.
	t.Setenv(cliutil.ProgressEnv, "")
	master, tty := openPTY(t)
	code := run(tty)
	tty.Close()                  // the master's reads end (EIO) once the terminal is closed
	got, _ := io.ReadAll(master) // the error is that EIO
	if code != 0 {
		t.Fatalf("export on a terminal: exit %d: %q", code, got)
	}
	if !strings.Contains(string(got), "\r"+line) || !strings.Contains(string(got), "\nExported 3 run(s)") {
		t.Fatalf("stderr a terminal: %q, want %q then the summary", got, line)
	}
}

// TestMigrateProgress: migrate's line counts the migrations applied of
// those pending: every one on a new database, none the second time. Not
// parallel: it sets KAGZI_PROGRESS.
func TestMigrateProgress(t *testing.T) {
	url, _ := newDatabaseURL(t)
	t.Setenv(cliutil.ProgressEnv, "1")
	c := &cli{t: t, url: url}
	out, errOut, code := c.run("migrate")
	if code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	var version int
	if _, err := fmt.Sscanf(out[strings.Index(out, "schema version"):], "schema version %d", &version); err != nil || version < 1 {
		t.Fatalf("migrate printed no schema version: %q", out)
	}
	if want := fmt.Sprintf("applying migrations: %d in ", version); !strings.Contains(errOut, want) {
		t.Fatalf("stderr %q, want %q", errOut, want)
	}
	if _, errOut, _ = c.run("migrate"); !strings.Contains(errOut, "applying migrations: 0 in ") {
		t.Fatalf("second migrate: stderr %q, want no migration applied", errOut)
	}
}
