package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/internal/natsauth"
)

// TestNATSConfig: the printed block is what nats-server loads, with one
// user per role and worker identity; bad identities are usage errors.
func TestNATSConfig(t *testing.T) {
	out, stderr, code := runCLI(t, "nats-config", "--namespace", "orders", "--worker", "orders/billing", "--worker", "default/worker")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	users, err := natsauth.Users(natsauth.Options{Namespaces: []string{"orders"}, Workers: []string{"orders/billing", "default/worker"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		t.Setenv(u.PasswordVar, "pw-"+u.Name)
	}
	path := filepath.Join(t.TempDir(), "auth.conf")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server cannot load the output: %v\n%s", err, out)
	}
	got := map[string]bool{}
	for _, u := range o.Users {
		got[u.Username] = u.Password == "pw-"+u.Username && u.Permissions != nil
	}
	for _, want := range []string{"dispatcher", "scheduler", "reaper", "console", "client-orders", "client-default",
		"worker-orders-billing", "worker-default-worker"} {
		if !got[want] {
			t.Errorf("no user %s with its password variable and permissions in:\n%s", want, out)
		}
	}
	for _, bad := range [][]string{{"--worker", "orders"}, {"--namespace", "a.b"}, {"--worker", "a/w.1"}} {
		if _, stderr, code := runCLI(t, append([]string{"nats-config"}, bad...)...); code != cliutil.ExitUsage {
			t.Errorf("nats-config %v: exit %d, want %d; stderr: %s", bad, code, cliutil.ExitUsage, stderr)
		}
	}
}
