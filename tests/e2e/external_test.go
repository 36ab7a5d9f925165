package e2e_test

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/tests/arch"
	"github.com/kagzi/kagzi/tests/testnats"
)

// externalProgram is an application outside this module: a worker and a
// client written against the public packages only.
const externalProgram = `package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

var Hello = workflow.New[string, string]("ExternalHello")

func hello(ctx workflow.Context, name string) (string, error) {
	return workflow.Step(ctx, "greet", func(context.Context) (string, error) { return "hello " + name, nil })
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	// The worker's own inbox prefix: where NATS authorization is on, the
	// dispatcher delivers there and nowhere else.
	nc, err := nats.Connect(os.Getenv("NATS_URL"), nats.UserInfo(os.Getenv("NATS_USER"), os.Getenv("NATS_PASSWORD")),
		worker.Inbox("", ""))
	if err != nil {
		return err
	}
	defer nc.Close()
	w, err := worker.New(worker.Config{Queue: "external"}, nc)
	if err != nil {
		return err
	}
	if err := worker.Implement(w, Hello, hello); err != nil {
		return err
	}
	if err := w.Start(ctx); err != nil {
		return err
	}
	defer w.Stop()
	cl, err := client.Connect(ctx, os.Getenv("DATABASE_URL"), nc, client.Options{Queue: "external"})
	if err != nil {
		return err
	}
	defer cl.Close()
	h, err := client.StartWorkflow(ctx, cl, Hello, "ada", client.StartOptions{})
	if err != nil {
		return err
	}
	out, err := h.Result(ctx)
	if err != nil {
		return err
	}
	fmt.Println(out)
	return nil
}
`

// TestExternalModule builds a program in a module of its own, which
// requires this one through a replace directive, and runs it against the
// services: a worker and a client written with the public packages alone.
// Its module graph holds none of the modules only Kagzi's tools and tests
// need (arch.ToolModules).
func TestExternalModule(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module example.com/app\n\ngo 1.26\n\nrequire github.com/kagzi/kagzi v0.0.0\n\nreplace github.com/kagzi/kagzi => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(externalProgram)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	goCmd := func(args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, goBin, args...)
		cmd.Dir = dir
		// Offline: everything comes from the module cache this module's
		// own build filled.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	goCmd("build", "-o", "app", ".")
	graph := strings.Fields(string(goCmd("mod", "graph")))
	if len(graph) == 0 {
		t.Fatal("go mod graph printed nothing")
	}
	tool := map[string]bool{}
	for _, node := range graph {
		if path, _, _ := strings.Cut(node, "@"); arch.IsToolModule(path) {
			tool[path] = true
		}
	}
	if len(tool) > 0 {
		t.Errorf("the application's module graph holds modules only Kagzi's tools and tests need: %v", slices.Sorted(maps.Keys(tool)))
	}

	e := start(t, opts{workers: -1})
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "app"))
	cmd.Env = append(os.Environ(), "DATABASE_URL="+e.url, "NATS_URL="+e.ns.URL())
	if e.auth != nil {
		// One connection serves the program's worker and client: the
		// Observer's, which may do both.
		cmd.Env = append(cmd.Env, "NATS_USER="+testnats.Observer, "NATS_PASSWORD="+e.auth.Password(testnats.Observer))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the external program failed: %v\n%s", err, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "hello ada" {
		t.Fatalf("the external program printed %q, want %q", got, "hello ada")
	}
}
