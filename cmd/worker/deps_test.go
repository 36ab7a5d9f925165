package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The worker binary needs NATS only: it must not link a database driver
// or the store.
func TestWorkerBinaryHasNoDatabaseDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "jackc/pgx") || strings.HasSuffix(dep, "kagzi/pkg/store") {
			t.Errorf("services/worker depends on %s", dep)
		}
	}
}
