package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/worker"
	"github.com/kagzi/kagzi/pkg/workflow"
)

// The examples of docs/sql.md, run as written against a running system.

var docFenceRE = regexp.MustCompile("^```(\\S*)\\s*$")

// docBlocks returns the bodies of the fenced blocks of lang in the page at
// path, in order.
func docBlocks(t *testing.T, path, lang string) []string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var cur []string
	in, keep := false, false
	for _, line := range strings.Split(string(text), "\n") {
		m := docFenceRE.FindStringSubmatch(line)
		switch {
		case m != nil && !in:
			in, keep, cur = true, m[1] == lang, nil
		case m != nil && in && m[1] == "":
			if keep {
				out = append(out, strings.Join(cur, "\n")+"\n")
			}
			in = false
		case in:
			cur = append(cur, line)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no %s blocks", path, lang)
	}
	return out
}

// needTool skips t when a tool an example needs is missing, but fails it
// under CI, where installing it is the project's business.
func needTool(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s: %v", what, err)
	}
	t.Skipf("%s: %v", what, err)
}

// TestSQLDocExamples runs the psql and Python examples of docs/sql.md as
// written: the psql blocks in one psql session, the Python blocks in one
// Python process, each fed to its interpreter once the run the block
// sends an event to waits for it. The runs the examples start are executed
// by a worker and complete, the waiting ones woken by the events (their
// waits time out only after an hour), and so do the runs the events the
// examples publish start through the trigger ship-orders.
func TestSQLDocExamples(t *testing.T) {
	t.Parallel()
	type order struct {
		Order int `json:"order"`
	}
	type approval struct {
		By string `json:"by"`
	}
	e := start(t, opts{workers: 1, register: func(w *worker.Worker) error {
		return errors.Join(
			worker.Register(w, "Greet", func(_ workflow.Context, in struct {
				Name string `json:"name"`
			}) (string, error) {
				return "Hello, " + in.Name, nil
			}),
			worker.Register(w, "Ship", func(_ workflow.Context, in order) (string, error) {
				return fmt.Sprintf("order %d shipped", in.Order), nil
			}),
			worker.Register(w, "Approval", func(ctx workflow.Context, in order) (string, error) {
				a, err := workflow.WaitForEvent[approval](ctx, "approved", time.Hour)
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("order %d approved by %s", in.Order, a.By), nil
			}),
		)
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	page := filepath.Join("..", "..", "docs", "sql.md")
	if _, err := e.srv.Store.TriggersCreate(ctx, store.Trigger{Namespace: "default", Name: "ship-orders", Pattern: "order.created",
		Type: "Ship", Queue: "default"}); err != nil {
		t.Fatal(err)
	}

	// waiting waits until the run holding externalID waits for its event.
	waiting := func(t *testing.T, externalID string) {
		t.Helper()
		waitUntil(t, 30*time.Second, externalID+" waiting for its event", func() bool {
			r, err := e.cl.GetByExternalID(ctx, externalID)
			return err == nil && r.Status == store.StatusSleeping
		})
	}
	// feed runs interpreter cmd, writing inputs to its stdin in turn
	// (input i once the run waitFor waits for its event, if sends[i]),
	// and returns its output.
	feed := func(t *testing.T, cmd *exec.Cmd, inputs []string, sends []bool, waitFor string) string {
		t.Helper()
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		for i, b := range inputs {
			if sends[i] {
				waiting(t, waitFor)
			}
			if _, err := io.WriteString(in, b); err != nil {
				t.Fatalf("write to %s: %v\n%s", cmd.Path, err, out.String())
			}
		}
		_ = in.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd.Path, err, out.String())
		}
		return out.String()
	}
	result := func(t *testing.T, externalID, want string) {
		t.Helper()
		// A trigger's run exists once the reaper fanned its event out.
		var r *client.Run
		var err error
		waitUntil(t, 30*time.Second, externalID+" started", func() bool {
			r, err = e.cl.GetByExternalID(ctx, externalID)
			return err == nil
		})
		var got string
		if err := e.cl.Handle(r.ID).Result(ctx, &got); err != nil || got != want {
			t.Fatalf("%s: result %q, %v; want %q", externalID, got, err, want)
		}
	}

	t.Run("psql", func(t *testing.T) {
		psql, err := exec.LookPath("psql")
		needTool(t, "psql", err)
		blocks := docBlocks(t, page, "sql")
		cmd := exec.CommandContext(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", e.url)
		feed(t, cmd, blocks, sendsEvent(blocks), "order-7")
		result(t, "greet-ada", "Hello, Ada")
		result(t, "order-7", "order 7 approved by ops")
		result(t, store.TriggerExternalID("ship-orders", uuid.MustParse("0192f3c4-8d5e-7a01-b2c3-d4e5f6a7b8c9")), "order 7 shipped")
	})

	t.Run("python", func(t *testing.T) {
		const python = "/usr/bin/python3"
		needTool(t, "psycopg 3 for "+python+" (scripts/ensure-psycopg.sh)", exec.CommandContext(ctx, python, "-c", "import psycopg").Run())
		blocks := docBlocks(t, page, "python")
		// One process runs the blocks in order; before each block after
		// the first it reads a line, which the test writes when the
		// block may run.
		script := filepath.Join(t.TempDir(), "example.py")
		const pause = "import sys as _kagzi_test_sys\n_kagzi_test_sys.stdin.readline()\n"
		if err := os.WriteFile(script, []byte(strings.Join(blocks, pause)), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, python, script)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+e.url)
		lines := make([]string, len(blocks)-1)
		for i := range lines {
			lines[i] = "\n"
		}
		out := feed(t, cmd, lines, sendsEvent(blocks[1:]), "order-8")
		event := uuid.NewSHA1(uuid.NameSpaceURL, []byte("orders/8/created"))
		if !strings.Contains(out, "started ") || !strings.Contains(out, "published "+event.String()) {
			t.Fatalf("python printed %q, want the run and event %s", out, event)
		}
		result(t, "order-8", "order 8 approved by ops")
		result(t, store.TriggerExternalID("ship-orders", event), "order 8 shipped")
	})
}

// sendsEvent reports, for each block, whether it sends an event.
func sendsEvent(blocks []string) []bool {
	out := make([]bool, len(blocks))
	for i, b := range blocks {
		out[i] = strings.Contains(b, "kagzi.send_event")
	}
	return out
}
