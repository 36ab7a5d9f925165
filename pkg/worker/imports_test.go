package worker_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestNoDatabaseDependency enforces that workers need NATS only: neither
// the worker runtime nor the workflow SDK may depend, even transitively,
// on pgx or on the store.
func TestNoDatabaseDependency(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	pkgs := []string{"github.com/kagzi/kagzi/pkg/worker", "github.com/kagzi/kagzi/pkg/workflow", "github.com/kagzi/kagzi/pkg/workflowtest"}
	for _, pkg := range pkgs {
		out, err := exec.CommandContext(t.Context(), goBin, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 || !contains(deps, pkg) || !contains(deps, "github.com/kagzi/kagzi/pkg/protocol") {
			t.Fatalf("go list -deps %s looks wrong: %v", pkg, deps)
		}
		for _, dep := range deps {
			if strings.Contains(dep, "jackc/pgx") || strings.Contains(dep, "kagzi/pkg/store") {
				t.Errorf("%s depends on %s: workers must not need a database", pkg, dep)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
