package main

import (
	"strings"
	"testing"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
)

// apitoken create prints the secret once, list never does, revoke ends
// the token; bad input is refused and creates nothing.
func TestAPITokenCommands(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.ok("migrate")
	var made ops.APITokenJSON
	c.okJSON(&made, "apitoken", "create", "ci", "--scope", "runs:start,runs:read", "--expires", "720h", "--rate", "50")
	if !strings.HasPrefix(made.Secret, "kzt_") || made.Rate != 50 || made.ExpiresAt == nil || len(made.Scopes) != 2 {
		t.Fatalf("create: %+v", made)
	}
	out := c.ok("apitoken", "list")
	if !strings.Contains(out, "ci") || !strings.Contains(out, "runs:start,runs:read") || strings.Contains(out, made.Secret) {
		t.Fatalf("list:\n%s", out)
	}
	// Invalid input is a usage error (2), a taken name a refusal (1).
	c.fails(cliutil.ExitUsage, "apitoken", "create", "x", "--scope", "runs:delete")
	c.fails(cliutil.ExitUsage, "apitoken", "create", "x", "--scope", "runs:read", "--rate", "10001")
	c.fails(cliutil.ExitFailed, "apitoken", "create", "ci", "--scope", "runs:read")
	var list struct{ Tokens []ops.APITokenJSON }
	c.okJSON(&list, "apitoken", "list")
	if len(list.Tokens) != 1 {
		t.Fatalf("%d tokens after refused creates", len(list.Tokens))
	}
	if out := c.ok("apitoken", "revoke", "ci"); !strings.Contains(out, "Revoked token ci") {
		t.Fatalf("revoke: %s", out)
	}
	if out := c.ok("apitoken", "list"); !strings.Contains(out, "No API tokens") {
		t.Fatalf("list after revoke:\n%s", out)
	}
	c.fails(cliutil.ExitFailed, "apitoken", "revoke", "ci")
}
