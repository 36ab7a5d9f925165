package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
)

// JSON input that is not UTF-8 is refused naming the flag, inline, from
// a file or from standard input, rather than stored with U+FFFD.
func TestInputMustBeUTF8(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	latin1 := "{\"name\": \"caf\xe9\"}"
	file := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(file, []byte(latin1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "start", "Echo", "--input", latin1},
		{"run", "start", "Echo", "--input", "@" + file},
	} {
		_, errOut := c.fails(cliutil.ExitUsage, args...)
		mustContain(t, "kagzi "+strings.Join(args[:3], " "), errOut, "--input is not UTF-8")
	}
	out, errOut, code := runCLIIn(t, latin1, "--database-url", c.url, "run", "start", "Echo", "--input", "-")
	if code != cliutil.ExitUsage || !strings.Contains(errOut, "--input is not UTF-8") {
		t.Errorf("--input - with Latin-1: exit %d\n%s%s", code, out, errOut)
	}
	if out := c.ok("run", "list"); strings.Contains(out, "Echo") {
		t.Errorf("a refused input started a run:\n%s", out)
	}
}

// An unknown run's state or stream is "not found", said once.
func TestProgressOfUnknownRunSaysItOnce(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	id := "0190c5f2-7a4e-7b1c-9d1e-2f3a4b5c6d7e"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "state", id}, "read state: run " + id + ": not found"},
		{[]string{"run", "state", id, "cart"}, "read state: run " + id + ": not found"},
		{[]string{"run", "stream", id, "tokens"}, `read stream "tokens": run ` + id + ": not found"},
	} {
		_, errOut := c.fails(cliutil.ExitFailed, tc.args...)
		mustContain(t, "kagzi "+strings.Join(tc.args, " "), errOut, tc.want)
		if n := strings.Count(errOut, id); n != 1 {
			t.Errorf("kagzi %s names the run %d times:\n%s", strings.Join(tc.args, " "), n, errOut)
		}
	}
}

// Durations are printed one way across the CLI, the way its flags read
// them: "1h", "1d12h", never "1h0m0s".
func TestDurationsPrintedOneWay(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	mustContain(t, "rate-limit set", c.ok("rate-limit", "set", "api", "5", "--per", "1h"), "per 1h\n")
	out := c.ok("rate-limit", "list")
	if !regexp.MustCompile(`(?m)^api\s+5\s+1h\s`).MatchString(out) {
		t.Errorf("rate-limit list does not print the period as 1h:\n%s", out)
	}
	var rl []ops.RateLimitJSON
	c.okJSON(&rl, "rate-limit", "list")
	if len(rl) != 1 || rl[0].Period != "1h" || rl[0].PeriodMS != 3600000 {
		t.Errorf("rate-limit list --json: %+v", rl)
	}
	mustContain(t, "schedule show", c.ok("schedule", "show", uuidRE.FindString(c.ok("schedule", "create", "Echo", "--cron", "@hourly",
		"--jitter", "90m"))), "Jitter:", "1h30m\n")
	for what, out := range map[string]string{"rate-limit": out} {
		if strings.Contains(out, "0m0s") || strings.Contains(out, "h0m") {
			t.Errorf("%s prints Go's long form:\n%s", what, out)
		}
	}
	for d, want := range map[string]string{"250ms": "250ms", "1500ms": "1.5s", "61s": "1m1s", "3600s": "1h", "90000s": "1d1h"} {
		parsed, err := cliutil.CheckDuration(d, 0)
		if err != nil || cliutil.FmtDuration(parsed) != want {
			t.Errorf("cliutil.FmtDuration(%s) = %q (%v), want %q", d, cliutil.FmtDuration(parsed), err, want)
		}
	}
}

// run show names a run's debounce key and starts, its concurrency key and
// its rate limit key, in text and in JSON.
func TestRunShowFlowKeys(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	var id string
	for range 3 {
		id = uuidRE.FindString(c.ok("run", "start", "Reindex", "--debounce-key", "catalog", "--debounce", "1h"))
	}
	out := c.ok("run", "show", id)
	if !regexp.MustCompile(`Debounce key:\s+catalog \(3 starts merged\)`).MatchString(out) {
		t.Errorf("run show of a debounced run:\n%s", out)
	}
	var v runShowJSON
	c.okJSON(&v, "run", "show", id)
	if v.DebounceKey != "catalog" || v.DebounceStarts != 3 {
		t.Errorf("run show --json of a debounced run: key %q, starts %d", v.DebounceKey, v.DebounceStarts)
	}

	id = uuidRE.FindString(c.ok("run", "start", "SyncCustomer", "--concurrency-key", "customer-7", "--rate-limit-key", "crm-api"))
	out = c.ok("run", "show", id)
	if !regexp.MustCompile(`Concurrency key:\s+customer-7\n`).MatchString(out) || !regexp.MustCompile(`Rate limit key:\s+crm-api\n`).MatchString(out) {
		t.Errorf("run show of a keyed run:\n%s", out)
	}
	c.okJSON(&v, "run", "show", id)
	if v.ConcurrencyKey != "customer-7" || v.RateLimitKey != "crm-api" || v.DebounceKey != "" {
		t.Errorf("run show --json of a keyed run: %+v", v.RunJSON)
	}
	if out := c.ok("--json", "run", "show", uuidRE.FindString(c.ok("run", "start", "Plain"))); strings.Contains(out, "_key") {
		t.Errorf("a run without keys shows empty ones:\n%s", out)
	}
}

// run show takes an external id, as event send does: the live run holding
// it, else the newest; --external-id for one that looks like a UUID.
func TestRunShowByExternalID(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	id := uuidRE.FindString(c.ok("run", "start", "Echo", "--id", "order-42"))
	var v runShowJSON
	c.okJSON(&v, "run", "show", "order-42")
	if v.RunID.String() != id || v.ExternalID != "order-42" {
		t.Errorf("run show order-42: run %s (%q), want %s", v.RunID, v.ExternalID, id)
	}
	uuidLike := "3f0e2c1a-0000-4000-8000-000000000000"
	byUUID := uuidRE.FindString(c.ok("run", "start", "Echo", "--id", uuidLike))
	c.okJSON(&v, "run", "show", "--external-id", uuidLike)
	if v.RunID.String() != byUUID {
		t.Errorf("run show --external-id %s: run %s, want %s", uuidLike, v.RunID, byUUID)
	}
	_, errOut := c.fails(cliutil.ExitFailed, "run", "show", "no-such-order")
	mustContain(t, "run show of an unknown external id", errOut, `external id "no-such-order"`, "not found")
	_, errOut = c.fails(cliutil.ExitFailed, "run", "show", uuidLike)
	mustContain(t, "run show of a UUID no run has", errOut, "not found")
}
