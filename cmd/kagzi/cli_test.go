package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/kagzi/kagzi/cmd/kagzi/internal/cliutil"
	"github.com/kagzi/kagzi/cmd/kagzi/internal/ops"
	"github.com/kagzi/kagzi/pkg/protocol"
	"github.com/kagzi/kagzi/pkg/store"
	"github.com/kagzi/kagzi/pkg/store/dbadmin"
	"github.com/kagzi/kagzi/tests/testdb"
	"github.com/kagzi/kagzi/tests/testnats"
)

// unreachableDB is a database URL nothing listens on: commands that fail
// on usage must fail before they connect.
const unreachableDB = "postgres://postgres@127.0.0.1:1/kagzi?sslmode=disable&connect_timeout=2"

// runCLI runs the CLI in-process with args and returns what it printed and
// its exit code.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runCLIIn(t, "", args...)
}

// runCLIIn is runCLI with standard input.
func runCLIIn(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code = execute(ctx, args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

// cli runs commands against one test database.
type cli struct {
	t   *testing.T
	url string
}

func newCLI(t *testing.T) *cli {
	t.Helper()
	return &cli{t: t, url: testdb.New(t)}
}

// run runs the CLI against the test database.
func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	return runCLI(c.t, append([]string{"--database-url", c.url}, args...)...)
}

// ok runs the CLI and fails the test unless it exits 0.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("kagzi %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// okJSON runs the CLI with --json and decodes its output into v.
func (c *cli) okJSON(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append([]string{"--json"}, args...)...)
	reflect.ValueOf(v).Elem().SetZero() // omitted fields must not keep old values
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("kagzi --json %s: decode %q: %v", strings.Join(args, " "), out, err)
	}
}

// fails runs the CLI and fails the test unless it exits with code.
func (c *cli) fails(code int, args ...string) (stdout, stderr string) {
	c.t.Helper()
	out, errOut, got := c.run(args...)
	if got != code {
		c.t.Fatalf("kagzi %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, out, errOut)
	}
	return out, errOut
}

func (c *cli) store() *store.Store {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := store.Connect(ctx, c.url)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(pool.Close)
	return store.New(pool, store.Options{})
}

var uuidRE = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// compact is JSON without insignificant space.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "invalid JSON: " + string(raw)
	}
	return b.String()
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, got)
		}
	}
}

func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	out, errOut, code := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("--help: exit %d: %s", code, errOut)
	}
	root := newRoot(&cliutil.App{})
	if len(root.Commands()) == 0 {
		t.Fatal("no commands registered")
	}
	for _, c := range root.Commands() {
		if c.Hidden { // internal plumbing, e.g. `serve` for bench
			continue
		}
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(c.Name()) + `\s`).MatchString(out) {
			t.Errorf("kagzi --help does not list %q:\n%s", c.Name(), out)
		}
	}
	mustContain(t, "kagzi --help", out, "migrate", "run", "event", "schedule", "worker",
		"--database-url", "--nats-url", "--namespace", "--json")

	// Every command has help with an example.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden {
			return
		}
		if strings.TrimSpace(c.Short) == "" || strings.TrimSpace(c.Example) == "" {
			t.Errorf("command %q needs a Short description and an Example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)

	out, _, code = runCLI(t, "run", "start", "--help")
	if code != 0 {
		t.Fatalf("run start --help: exit %d", code)
	}
	mustContain(t, "kagzi run start --help", out, "Examples:", "--input", "--wait", "--timeout", "--id")
	// A group alone prints its help.
	out, _, code = runCLI(t, "schedule")
	if code != 0 {
		t.Fatalf("schedule: exit %d", code)
	}
	mustContain(t, "kagzi schedule", out, "create", "pause", "resume", "trigger", "delete", "history")
}

func TestUsageErrorsExit2BeforeConnecting(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", unreachableDB}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "retry", "not-a-uuid"}, "not a UUID"},
		{[]string{"run", "cancel", "1234"}, "not a UUID"},
		{[]string{"schedule", "pause", "xyz"}, "not a UUID"},
		{[]string{"schedule", "history", "xyz"}, "not a UUID"},
		{[]string{"run", "start", "Foo", "--input", "{nope"}, "--input is not valid JSON"},
		{[]string{"run", "start", "Foo", "--input", "@/does/not/exist.json"}, "--input"},
		{[]string{"schedule", "create", "Foo", "--cron", "* * * * *", "--input", "[1,"}, "--input is not valid JSON"},
		{[]string{"event", "send", "order-1", "paid", "--data", "{"}, "--data is not valid JSON"},
		{[]string{"event", "send", "order-1", "paid", "--payload", "{"}, "--payload is not valid JSON"},
		{[]string{"run", "list", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"--bogus"}, "unknown flag"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"run", "bogus"}, `unknown command "bogus" for "kagzi run"`},
		{[]string{"run", "show"}, "accepts 1 arg"},
		{[]string{"run", "list", "extra"}, "unknown command"},
		{[]string{"run", "list", "--status", "DONE"}, "not a run status"},
		{[]string{"run", "list", "--limit", "0"}, "--limit"},
		{[]string{"run", "list", "--cursor", "garbage!"}, "--cursor"},
		{[]string{"run", "list", "--limit", "ten"}, "invalid argument"},
		{[]string{"run", "start", "Foo", "--timeout", "1s"}, "--timeout bounds --wait"},
		{[]string{"run", "start", "Foo", "--deadline", "-5m"}, "--deadline"},
		{[]string{"schedule", "create", "Foo"}, `required flag(s) "cron" not set`},
		{[]string{"schedule", "create", "Foo", "--cron", "* * * * *", "--max-catchup", "-1"}, "--max-catchup"},
		{[]string{"worker", "list", "--status", "BUSY"}, "not a worker status"},
		{[]string{"--namespace", "a.b", "run", "list"}, "--namespace"},
	}
	for _, tc := range cases {
		out, errOut, code := runCLI(t, append(db, tc.args...)...)
		if code != cliutil.ExitUsage {
			t.Errorf("kagzi %s: exit %d, want 2\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), code, out, errOut)
			continue
		}
		mustContain(t, "stderr of kagzi "+strings.Join(tc.args, " "), errOut, tc.want, "--help' for usage")
	}
}

func TestUnreachableDatabaseExits1(t *testing.T) {
	t.Parallel()
	_, errOut, code := runCLI(t, "--database-url", unreachableDB, "run", "list")
	if code != cliutil.ExitFailed {
		t.Fatalf("exit %d, want 1: %s", code, errOut)
	}
	mustContain(t, "stderr", errOut, "connect to Postgres", "--database-url")
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{cliutil.Usagef("bad"), 2},
		{fmt.Errorf("wrapped: %w", cliutil.Usagef("bad")), 2},
		{fmt.Errorf("create: %w: queue is required", store.ErrInvalidArgument), 2},
		{fmt.Errorf("%w: input is 3 MiB", store.ErrPayloadTooLarge), 2},
		{fmt.Errorf("get run: %w", store.ErrNotFound), 1},
		{fmt.Errorf("cancel: %w", store.ErrConflict), 1},
		{context.Canceled, 1},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestMigrateCreatesDatabase(t *testing.T) {
	t.Parallel()
	url, _ := newDatabaseURL(t)
	c := &cli{t: t, url: url}

	// Before migrating, commands say what to do.
	_, errOut := c.fails(cliutil.ExitFailed, "run", "list")
	mustContain(t, "stderr", errOut, "kagzi migrate")

	var m migrateJSON
	c.okJSON(&m, "migrate")
	if !m.DatabaseCreated || m.Version < 1 {
		t.Fatalf("first migrate: %+v, want a created database at a version", m)
	}
	out := c.ok("migrate")
	mustContain(t, "second migrate", out, fmt.Sprintf("schema version %d", m.Version))
	if strings.Contains(out, "Created database") {
		t.Errorf("second migrate created the database again:\n%s", out)
	}
	c.ok("run", "list")
}

// TestMigrateRoles: migrate --roles (twice) creates the roles, migrates
// as the owner and lets the runtime role, which the CLI then connects as,
// work with runs.
func TestMigrateRoles(t *testing.T) {
	t.Parallel()
	var b [6]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	name, owner, runtime, sqlRole := "kagzi_t_cli_"+suffix, "kagzi_o_"+suffix, "kagzi_rt_"+suffix, "kagzi_sq_"+suffix
	dbURL, err := dbadmin.DatabaseURL(testdb.AdminURL(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dbadmin.DatabaseDrop(ctx, testdb.AdminURL(), name); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
		if err := dbadmin.RolesDrop(ctx, testdb.AdminURL(), owner, runtime, sqlRole); err != nil {
			t.Logf("drop roles: %v", err)
		}
	})
	admin := &cli{t: t, url: dbURL}
	for i := 0; i < 2; i++ {
		out := admin.ok("migrate", "--roles", "--owner-role", owner, "--runtime-role", runtime, "--sql-role", sqlRole)
		mustContain(t, "migrate --roles", out, "Migrated as "+owner, sqlRole+" may call kagzi.start_run, kagzi.send_event and kagzi.publish only")
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(runtime)
	rt := &cli{t: t, url: u.String()}
	out := rt.ok("run", "start", "ProcessOrder", "--input", `{"order_id": 1}`)
	mustContain(t, "run start as the runtime role", out, "Started run")
	mustContain(t, "run list as the runtime role", rt.ok("run", "list"), "ProcessOrder")
}

func TestRunStartListShowCancel(t *testing.T) {
	t.Parallel()
	c := newCLI(t)

	// Start, table output.
	out := c.ok("run", "start", "ProcessOrder", "--input", `{"order_id": 42}`, "--queue", "orders", "--priority", "7",
		"--deadline", "1h", "--version", "v2")
	mustContain(t, "run start", out, "Started run", "ProcessOrder")
	id := uuidRE.FindString(out)
	if id == "" {
		t.Fatalf("no run id in %q", out)
	}

	// Start with --id is idempotent, JSON output.
	var s1, s2 startJSON
	c.okJSON(&s1, "run", "start", "ProcessOrder", "--id", "order-43", "--input", `{"order_id": 43}`)
	c.okJSON(&s2, "run", "start", "ProcessOrder", "--id", "order-43", "--input", `{"order_id": 43}`)
	if !s1.Created || s2.Created || s1.RunID != s2.RunID || s1.RunID == "" {
		t.Fatalf("idempotent start: first %+v, second %+v", s1, s2)
	}
	out = c.ok("run", "start", "ProcessOrder", "--id", "order-43")
	mustContain(t, "repeated start", out, s1.RunID, "already exists", "order-43")

	// Input from stdin.
	out, errOut, code := runCLIIn(t, `{"from": "stdin"}`, "--database-url", c.url, "--json", "run", "start", "Other", "--input", "-")
	if code != 0 {
		t.Fatalf("start with stdin input: exit %d: %s", code, errOut)
	}
	var s3 startJSON
	if err := json.Unmarshal([]byte(out), &s3); err != nil || !s3.Created {
		t.Fatalf("start with stdin input: %q %v", out, err)
	}

	// List, table.
	out = c.ok("run", "list")
	mustContain(t, "run list", out, "RUN ID", "STATUS", id, s1.RunID, s3.RunID, "order-43", "PENDING")

	// List, JSON, with filters.
	var page runsPage
	c.okJSON(&page, "run", "list", "--type", "ProcessOrder", "--status", "pending")
	if len(page.Runs) != 2 || page.NextCursor != "" {
		t.Fatalf("list --type ProcessOrder: %+v", page)
	}
	if page.Runs[0].RunID.String() != s1.RunID || page.Runs[1].RunID.String() != id {
		t.Fatalf("list is not newest first: %+v", page.Runs)
	}
	r := page.Runs[1]
	if r.Queue != "orders" || r.Priority != 7 || r.Version != "v2" || r.Status != store.StatusPending ||
		r.DeadlineAt == nil || r.Namespace != "default" || r.Input != nil {
		t.Fatalf("listed run: %+v", r)
	}
	c.okJSON(&page, "run", "list", "--queue", "nope")
	if len(page.Runs) != 0 {
		t.Fatalf("list --queue nope: %+v", page.Runs)
	}

	// Paging: every run exactly once.
	seen := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		args := []string{"run", "list", "--limit", "1"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		c.okJSON(&page, args...)
		for _, r := range page.Runs {
			if seen[r.RunID.String()] {
				t.Fatalf("run %s listed twice", r.RunID)
			}
			seen[r.RunID.String()] = true
		}
		if page.NextCursor == "" {
			break
		}
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		cursor = page.NextCursor
	}
	if len(seen) != 3 {
		t.Fatalf("paging saw %d runs, want 3", len(seen))
	}
	_, errOut, code = c.run("run", "list", "--limit", "1")
	if code != 0 || !strings.Contains(errOut, "--cursor ") {
		t.Fatalf("table list with more pages: exit %d, stderr %q", code, errOut)
	}

	// Show, table and JSON.
	out = c.ok("run", "show", id)
	mustContain(t, "run show", out, "Run ID:", id, "Status:", "PENDING", "Queue:", "orders", `{"order_id":42}`,
		"No steps recorded.")
	var shown runShowJSON
	c.okJSON(&shown, "run", "show", id)
	if shown.RunID.String() != id || shown.Type != "ProcessOrder" || compact(shown.Input) != `{"order_id":42}` ||
		shown.Steps == nil || len(shown.Steps) != 0 {
		t.Fatalf("show --json: %+v", shown)
	}

	// Show of an unknown run: exit 1, with a hint.
	_, errOut = c.fails(cliutil.ExitFailed, "run", "show", uuid.NewString())
	mustContain(t, "stderr", errOut, "not found", "kagzi run list")

	// Cancel, then cancel again (a conflict).
	out = c.ok("run", "cancel", id)
	mustContain(t, "run cancel", out, "Cancelled run", id)
	var cancelled cliutil.RunJSON
	c.okJSON(&cancelled, "run", "cancel", s1.RunID)
	if cancelled.Status != store.StatusCancelled || cancelled.FinishedAt == nil {
		t.Fatalf("cancel --json: %+v", cancelled)
	}
	_, errOut = c.fails(cliutil.ExitFailed, "run", "cancel", id)
	mustContain(t, "stderr", errOut, "CANCELLED", "only PENDING, RUNNING or SLEEPING")
	c.fails(cliutil.ExitFailed, "run", "cancel", uuid.NewString())

	c.okJSON(&page, "run", "list", "--status", "CANCELLED")
	if len(page.Runs) != 2 {
		t.Fatalf("list --status CANCELLED: %d runs", len(page.Runs))
	}

	// Another namespace sees nothing.
	c.okJSON(&page, "--namespace", "other", "run", "list")
	if len(page.Runs) != 0 {
		t.Fatalf("namespace other: %+v", page.Runs)
	}
	c.fails(cliutil.ExitFailed, "--namespace", "other", "run", "show", s3.RunID)

	// Invalid input the store rejects is bad usage too.
	c.fails(cliutil.ExitUsage, "run", "start", "Bad.Type")
}

func TestRunShowTimeline(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.store()
	ctx := context.Background()
	var s startJSON
	c.okJSON(&s, "run", "start", "Pipeline", "--input", `[1, 2]`)

	claimed, err := st.RunsClaim(ctx, store.RunsClaimParams{Namespace: "default", Queue: "default", WorkerID: uuid.New(),
		Types: []store.TypeVersion{{Type: "Pipeline", Version: "v1"}}, Limit: 1, Lease: time.Minute})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %d", err, len(claimed))
	}
	l := store.Lease{Namespace: "default", RunID: claimed[0].ID, Token: claimed[0].LeaseToken}
	t0 := time.Now().Add(-3 * time.Second)
	t1, t2, t3 := t0.Add(1500*time.Millisecond), t0.Add(2*time.Second), t0.Add(2250*time.Millisecond)
	t4 := t3.Add(42 * time.Second) // a sleep's wake time, ahead
	wake, _ := json.Marshal(t4)
	for _, p := range []store.StepsRecordParams{
		{Lease: l, StepID: "fetch", Attempt: 1, Kind: store.StepFunction, Status: store.StepFailed,
			Error: "connection reset by peer", StartedAt: &t0, FinishedAt: &t1},
		{Lease: l, StepID: "fetch", Attempt: 2, Kind: store.StepFunction, Status: store.StepCompleted,
			Output: []byte(`{"rows": 3}`), StartedAt: &t2, FinishedAt: &t3},
		// A sleep is recorded as it starts, its wake time its output.
		{Lease: l, StepID: "nap", Attempt: 1, Kind: store.StepSleep, Status: store.StepCompleted,
			Output: wake, StartedAt: &t3, FinishedAt: &t3},
	} {
		if err := st.StepsRecord(ctx, p); err != nil {
			t.Fatalf("record step: %v", err)
		}
	}

	out := c.ok("run", "show", s.RunID)
	mustContain(t, "run show", out, "RUNNING", "STEP", "KIND", "ATTEMPT", "DURATION", "ERROR",
		"fetch", "FUNCTION", "FAILED", "1.5s", "connection reset by peer", "COMPLETED", "250ms", "nap", "SLEEP", "42s")
	var shown runShowJSON
	c.okJSON(&shown, "run", "show", s.RunID)
	if len(shown.Steps) != 3 || shown.Steps[2].DurationMS == nil || *shown.Steps[2].DurationMS != 42000 {
		t.Fatalf("steps: %+v", shown.Steps)
	}
	a1, a2 := shown.Steps[0], shown.Steps[1]
	if a1.StepID != "fetch" || a1.Attempt != 1 || a1.Status != store.StepFailed || a1.Latest ||
		a1.Error != "connection reset by peer" || a1.DurationMS == nil || *a1.DurationMS != 1500 {
		t.Fatalf("first attempt: %+v", a1)
	}
	if a2.Attempt != 2 || a2.Status != store.StepCompleted || !a2.Latest || compact(a2.Output) != `{"rows":3}` ||
		a2.Kind != store.StepFunction {
		t.Fatalf("second attempt: %+v", a2)
	}
	if shown.Status != store.StatusRunning || shown.LockedBy == nil || shown.Attempts != 1 {
		t.Fatalf("run: %+v", shown.RunJSON)
	}
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	c := newCLI(t)

	out := c.ok("schedule", "create", "Report", "--cron", "0 9 * * 1-5", "--tz", "Europe/Paris",
		"--input", `{"kind": "daily"}`, "--queue", "reports", "--max-catchup", "2", "--version", "v3")
	mustContain(t, "schedule create", out, "Created schedule", "Report", "Europe/Paris")
	id := uuidRE.FindString(out)
	if id == "" {
		t.Fatalf("no schedule id in %q", out)
	}
	var sc ops.ScheduleJSON
	c.okJSON(&sc, "schedule", "create", "Cleanup", "--cron", "*/15 * * * *")
	if sc.Type != "Cleanup" || sc.Queue != "default" || sc.Timezone != "UTC" || sc.Status != store.StatusScheduled ||
		sc.NextFireAt == nil || !sc.NextFireAt.After(time.Now()) || sc.MaxCatchup != 0 {
		t.Fatalf("create --json: %+v", sc)
	}

	// Bad cron and zone are bad usage.
	c.fails(cliutil.ExitUsage, "schedule", "create", "X", "--cron", "not a cron")
	c.fails(cliutil.ExitUsage, "schedule", "create", "X", "--cron", "* * * * *", "--tz", "Mars/Olympus")

	// List, table and JSON.
	out = c.ok("schedule", "list")
	mustContain(t, "schedule list", out, "SCHEDULE ID", "CRON", id, sc.ScheduleID.String(), "0 9 * * 1-5", "SCHEDULED")
	var page ops.SchedulesPage
	c.okJSON(&page, "schedule", "list")
	if len(page.Schedules) != 2 || page.Schedules[1].ScheduleID.String() != id {
		t.Fatalf("schedule list --json: %+v", page)
	}
	if got := page.Schedules[1]; got.Queue != "reports" || got.Version != "v3" || got.MaxCatchup != 2 || got.Cron != "0 9 * * 1-5" {
		t.Fatalf("listed schedule: %+v", got)
	}

	// Show.
	var shown ops.ScheduleJSON
	c.okJSON(&shown, "schedule", "show", id)
	if compact(shown.Input) != `{"kind":"daily"}` || shown.Status != store.StatusScheduled {
		t.Fatalf("show: %+v", shown)
	}
	mustContain(t, "schedule show", c.ok("schedule", "show", id), "Cron:", "0 9 * * 1-5", "Time zone:", "Europe/Paris")

	// Pause and resume, table and JSON.
	mustContain(t, "schedule pause", c.ok("schedule", "pause", id), "Paused schedule", id)
	c.okJSON(&shown, "schedule", "pause", id) // pausing twice is a no-op
	if shown.Status != store.StatusPaused || shown.NextFireAt != nil {
		t.Fatalf("paused: %+v", shown)
	}
	mustContain(t, "schedule list", c.ok("schedule", "list"), "PAUSED")
	mustContain(t, "schedule resume", c.ok("schedule", "resume", id), "Resumed schedule", id, "next fire")
	c.okJSON(&shown, "schedule", "show", id)
	if shown.Status != store.StatusScheduled || shown.NextFireAt == nil {
		t.Fatalf("resumed: %+v", shown)
	}

	// Trigger, then history.
	var fired cliutil.RunJSON
	c.okJSON(&fired, "schedule", "trigger", id)
	if fired.ScheduleID == nil || fired.ScheduleID.String() != id || fired.Type != "Report" || fired.Queue != "reports" ||
		fired.Status != store.StatusPending {
		t.Fatalf("trigger: %+v", fired)
	}
	mustContain(t, "schedule trigger", c.ok("schedule", "trigger", id), "Triggered schedule", "started run")
	var hist ops.HistoryJSON
	c.okJSON(&hist, "schedule", "history", id)
	if len(hist.Runs) != 2 || hist.Runs[1].RunID != fired.RunID {
		t.Fatalf("history: %+v", hist)
	}
	mustContain(t, "schedule history", c.ok("schedule", "history", id), "FIRE TIME", fired.RunID.String())
	mustContain(t, "empty history", c.ok("schedule", "history", sc.ScheduleID.String()), "no runs yet")

	// A schedule is not a run to cancel, and runs are not schedules.
	c.fails(cliutil.ExitFailed, "schedule", "show", fired.RunID.String())

	// Delete: the fired runs stay.
	var del ops.DeletedJSON
	c.okJSON(&del, "schedule", "delete", id)
	if !del.Deleted || del.ScheduleID != id {
		t.Fatalf("delete: %+v", del)
	}
	_, errOut := c.fails(cliutil.ExitFailed, "schedule", "show", id)
	mustContain(t, "stderr", errOut, "not found", "kagzi schedule list")
	c.fails(cliutil.ExitFailed, "schedule", "delete", id)
	c.fails(cliutil.ExitFailed, "schedule", "pause", id)
	c.fails(cliutil.ExitFailed, "schedule", "resume", id)
	c.fails(cliutil.ExitFailed, "schedule", "trigger", id)
	c.fails(cliutil.ExitFailed, "schedule", "history", id)
	c.ok("run", "show", fired.RunID.String())
}

func TestWorkerList(t *testing.T) {
	t.Parallel()
	c := newCLI(t)

	mustContain(t, "empty worker list", c.ok("worker", "list"), "No workers")
	var ws ops.WorkersJSON
	c.okJSON(&ws, "worker", "list")
	if ws.Workers == nil || len(ws.Workers) != 0 {
		t.Fatalf("empty list: %+v", ws)
	}

	st := c.store()
	w, err := st.WorkersRegister(context.Background(), store.WorkersRegisterParams{
		WorkerID: uuid.New(), Namespace: "default", Queue: "orders", Hostname: "host-1", PID: 4242, Version: "1.2.3",
		Types: []store.TypeVersion{{Type: "ProcessOrder", Version: "v2"}}, MaxConcurrency: 16,
	})
	if err != nil {
		t.Fatal(err)
	}
	out := c.ok("worker", "list")
	mustContain(t, "worker list", out, "WORKER ID", w.ID.String(), "orders", "host-1", "4242", "ONLINE", "ProcessOrder@v2", "16")
	c.okJSON(&ws, "worker", "list", "--status", "online", "--queue", "orders")
	if len(ws.Workers) != 1 {
		t.Fatalf("worker list --json: %+v", ws)
	}
	got := ws.Workers[0]
	if got.WorkerID != w.ID || got.Hostname != "host-1" || got.PID != 4242 || got.MaxConcurrency != 16 ||
		got.Status != store.WorkerOnline || len(got.Types) != 1 || got.Types[0].Type != "ProcessOrder" {
		t.Fatalf("listed worker: %+v", got)
	}
	c.okJSON(&ws, "worker", "list", "--status", "OFFLINE")
	if len(ws.Workers) != 0 {
		t.Fatalf("--status OFFLINE: %+v", ws)
	}
}

func TestWorkerDrainAndDefaultVersion(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	st := c.store()
	w, err := st.WorkersRegister(context.Background(), store.WorkersRegisterParams{
		WorkerID: uuid.New(), Namespace: "default", Queue: "orders", Hostname: "host-1", PID: 1,
		Types: []store.TypeVersion{{Type: "ProcessOrder", Version: "v2"}}, MaxConcurrency: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The worker is told on its cancel subject.
	ns := testnats.Start(t)
	nc := ns.Connect(t)
	told, err := nc.SubscribeSync(protocol.SubjectCancel("default", w.ID))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "worker drain", c.ok("--nats-url", ns.URL(), "worker", "drain", w.ID.String()), w.ID.String(), "DRAINING")
	msg, err := told.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("the worker was not told: %v", err)
	}
	var m protocol.Cancel
	if err := protocol.Decode(msg.Data, &m); err != nil || !m.Drain || m.WorkerID != w.ID {
		t.Fatalf("drain message %+v %v", m, err)
	}
	if got, err := st.WorkersGet(context.Background(), "default", w.ID); err != nil || got.Status != store.WorkerDraining {
		t.Fatalf("drained worker: %+v %v", got, err)
	}
	c.fails(1, "--nats-url", ns.URL(), "worker", "drain", uuid.New().String())

	mustContain(t, "no defaults", c.ok("workflow", "default-version"), "No default versions")
	mustContain(t, "set default", c.ok("workflow", "default-version", "ProcessOrder", "v2"), "default version v2")
	mustContain(t, "list defaults", c.ok("workflow", "default-version"), "ProcessOrder", "v2")
	r, created, err := st.RunsCreate(context.Background(), store.RunsCreateParams{Namespace: "default", Queue: "orders", Type: "ProcessOrder"})
	if err != nil || !created || r.Version != "v2" {
		t.Fatalf("run started after the default was set: %+v %v", r, err)
	}
	c.ok("workflow", "default-version", "ProcessOrder", "--unset")
	mustContain(t, "unset", c.ok("workflow", "default-version"), "No default versions")
	c.fails(2, "workflow", "default-version", "ProcessOrder")
}

func TestEventSend(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var s startJSON
	c.okJSON(&s, "run", "start", "Checkout", "--id", "cart-7")

	// By external id, table output.
	out := c.ok("event", "send", "cart-7", "paid", "--payload", `{"amount": 1999}`)
	mustContain(t, "event send", out, `"paid"`, s.RunID)

	// --data, the payload's former name, still works and says so.
	out, errOut, code := c.run("event", "send", "cart-7", "noted", "--data", `{"n": 1}`)
	if code != 0 {
		t.Fatalf("event send --data: exit %d: %s", code, errOut)
	}
	mustContain(t, "event send --data", out, `"noted"`)
	mustContain(t, "event send --data's stderr", errOut, "--data has been deprecated, use --payload")

	// By run id, JSON output.
	var ev eventJSON
	c.okJSON(&ev, "event", "send", s.RunID, "shipped")
	if ev.RunID.String() != s.RunID || ev.Name != "shipped" || ev.RunStatus != store.StatusPending ||
		ev.Woken || string(ev.Data) != "null" || ev.EventID == uuid.Nil {
		t.Fatalf("event send --json: %+v", ev)
	}

	// Unknown run: 1. Finished run: 1.
	_, errOut = c.fails(cliutil.ExitFailed, "event", "send", "cart-unknown", "paid")
	mustContain(t, "stderr", errOut, "not found")
	c.ok("run", "cancel", s.RunID)
	_, errOut = c.fails(cliutil.ExitFailed, "event", "send", s.RunID, "paid")
	mustContain(t, "stderr", errOut, "finished")
}

// `run show` says whether a live worker serves a waiting run, and
// `run start --require-worker` refuses a start nobody serves.
func TestRunShowSaysWhenNoWorkerServes(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	out := c.ok("run", "start", "ProcessOrder", "--queue", "orders", "--version", "v2")
	id := uuidRE.FindString(out)
	out = c.ok("run", "show", id)
	mustContain(t, "run show", out, "Workers:", "none: no live worker serves ProcessOrder@v2 on queue orders")
	var shown runShowJSON
	c.okJSON(&shown, "run", "show", id)
	if shown.WorkersServing == nil || *shown.WorkersServing != 0 {
		t.Fatalf("show --json: workers_serving %v, want 0", shown.WorkersServing)
	}
	_, errOut := c.fails(cliutil.ExitFailed, "run", "start", "ProcessOrder", "--queue", "orders", "--version", "v2", "--require-worker")
	mustContain(t, "refused start", errOut, "no live worker serves ProcessOrder@v2 on queue orders", "Hint:", "kagzi worker list")

	if _, err := c.store().WorkersRegister(context.Background(), store.WorkersRegisterParams{WorkerID: uuid.New(),
		Namespace: "default", Queue: "orders", Types: []store.TypeVersion{{Type: "ProcessOrder", Version: "v2"}}, MaxConcurrency: 1}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "run show with a worker", c.ok("run", "show", id), "Workers:", "1 live worker serves ProcessOrder@v2 on queue orders")
	mustContain(t, "required start with a worker", c.ok("run", "start", "ProcessOrder", "--queue", "orders", "--version", "v2", "--require-worker"),
		"Started run")
}

// newDatabaseURL returns the URL and the name of a database of the
// test's own that does not exist yet (the CLI's migrate creates it),
// dropped when the test ends.
func newDatabaseURL(t *testing.T) (url, name string) {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = "kagzi_t_cli_" + hex.EncodeToString(b[:])
	url, err := dbadmin.DatabaseURL(testdb.AdminURL(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := dbadmin.DatabaseDrop(ctx, testdb.AdminURL(), name); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	return url, name
}
