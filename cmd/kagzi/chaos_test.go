package main

import (
	"testing"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
)

// `kagzi chaos` itself runs for minutes (make chaos); here only its help
// and its usage errors, which must be reported before anything starts.
func TestChaosUsage(t *testing.T) {
	out, _, code := runCLI(t, "chaos", "--help")
	if code != 0 {
		t.Fatalf("chaos --help exited %d", code)
	}
	mustContain(t, "kagzi chaos --help", out, "--model", "--regressions", "--runs", "--duration", "--kill-every", "--timeout", "--max-recovery",
		"chaos: N runs, N completed, 0 lost, 0 duplicate results, max recovery X ms")
	for _, args := range [][]string{
		{"chaos", "--sleep-fraction", "2"},
		{"chaos", "--steps", "2"},
		{"chaos", "--duration", "1s"},
		{"chaos", "extra"},
		{"chaos", "--regressions", "x.json"},
	} {
		if _, stderr, code := runCLI(t, args...); code != cliutil.ExitUsage {
			t.Errorf("%v: exit %d, want %d; stderr: %s", args, code, cliutil.ExitUsage, stderr)
		}
	}
}
