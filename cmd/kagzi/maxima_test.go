package main

import (
	"strings"
	"testing"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
)

// Every duration and count the CLI takes has a maximum: above it the
// command exits 2 saying "above the maximum", and nothing is set.
func TestCLIMaxima(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	id := strings.TrimSpace(c.ok("--json", "run", "start", "Echo"))
	id = uuidRE.FindString(id)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rate-limit", "set", "r0", "1", "--per", "876000h"}, "above the maximum 1d"},
		{[]string{"rate-limit", "set", "r0", "1", "--per", "25h"}, "above the maximum 1d"},
		{[]string{"run", "start", "Echo", "--debounce-key", "k", "--debounce", "876000h"}, "above the maximum 7d"},
		{[]string{"run", "start", "Echo", "--debounce-key", "k", "--debounce", "1s", "--debounce-max-wait", "8d"}, "above the maximum 7d"},
		{[]string{"run", "start", "Echo", "--id", "x", "--id-reuse", "reject", "--id-reuse-window", "36501d"}, "above the maximum 36500d"},
		{[]string{"run", "start", "Echo", "--deadline", "9999999999h"}, "above the maximum"},
		{[]string{"retention", "set", "--failed", "1000000d"}, "above the maximum 36500d"},
		{[]string{"retention", "set", "--completed", "36501d"}, "above the maximum 36500d"},
		{[]string{"schedule", "create", "Echo", "--cron", "@hourly", "--jitter", "8d"}, "above the maximum 7d"},
		{[]string{"run", "stream", id, "tok", "--from", "99999999999"}, "above the maximum 10000"},
		{[]string{"run", "list", "--limit", "1001"}, "1 to 1000"},
		{[]string{"run", "export", "--finished-before", "9999999999d"}, "above the maximum"},
		{[]string{"dev", "--workers", "100000"}, "1 to 64"},
	} {
		_, errOut := c.fails(cliutil.ExitUsage, tc.args...)
		mustContain(t, "kagzi "+strings.Join(tc.args, " "), errOut, tc.want)
		if strings.Contains(errOut, "int4") || strings.Contains(errOut, "SQLSTATE") {
			t.Errorf("kagzi %s leaks a driver error: %s", strings.Join(tc.args, " "), errOut)
		}
	}
	// Nothing was set.
	if out := c.ok("rate-limit", "list"); !strings.Contains(out, "No rate limits") {
		t.Errorf("a refused rate limit was set:\n%s", out)
	}
	// The maxima themselves are accepted.
	c.ok("rate-limit", "set", "r0", "1", "--per", "1d")
	c.ok("retention", "set", "--failed", "36500d")
	c.ok("run", "start", "Echo", "--debounce-key", "k", "--debounce", "7d", "--debounce-max-wait", "7d")
}
