package console_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
)

// The browser tests drive Debian's chromium (scripts/ensure-chromium.sh
// installs it in `make test`) headless through chromedp against the live
// engine, and save screenshots of every view, light and dark, in
// KAGZI_ARTIFACTS_DIR (default artifacts/console at the repository root,
// ignored by git).

func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func artifactsDir(t *testing.T) string {
	dir := os.Getenv("KAGZI_ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "artifacts", "console")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		t.Skip("chromium is not installed (scripts/ensure-chromium.sh installs it as root)")
	}
	// A fresh profile, removed best-effort: chromium's helper processes
	// may still write into it for a moment after the browser is closed.
	profile, err := os.MkdirTemp("", "kagzi-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(profile) })
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(profile),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1400, 900),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first Run starts the browser and binds it to ctx (a derived
	// context's cancel would close it); a hung start fails the test by its
	// own timeout.
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// run runs chromedp actions with a deadline, failing the test on error.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func shoot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	for _, scheme := range []string{"light", "dark"} {
		var png []byte
		run(t, ctx, "screenshot "+name+" "+scheme,
			emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}),
			chromedp.Sleep(50*time.Millisecond), // let the new colours paint; not a synchronisation of state
			chromedp.FullScreenshot(&png, 100))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%s.png", name, scheme)), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBrowser(t *testing.T) {
	if chromiumPath() == "" {
		t.Skip("chromium is not installed (scripts/ensure-chromium.sh installs it as root)")
	}
	e := start(t, console.Options{})
	ctx := browser(t) // closed before the console's server
	dir := artifactsDir(t)
	bg := context.Background()

	// Some history: completed, failed, a waiting run, a child, a schedule.
	var ids []uuid.UUID
	for i := range 4 {
		h, err := e.cl.Start(bg, "Echo", map[string]any{"customer": []string{"ada", "bob", "cy", "dee"}[i], "amount": 10 * (i + 1)}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.RunID)
	}
	failed, err := e.cl.Start(bg, "Fail", map[string]int{"order": 42}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waiting, err := e.cl.Start(bg, "Wait", map[string]string{"for": "approval"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		e.wait(id)
	}
	e.wait(failed.RunID)
	if _, err := e.cl.CreateSchedule(bg, "Echo", map[string]string{"report": "daily"}, client.ScheduleOptions{Cron: "0 9 * * 1-5", Timezone: "Europe/Berlin"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cl.SetConcurrencyLimit(bg, "default", "Fail", 3); err != nil {
		t.Fatal(err)
	}
	base := e.http.URL

	// Runs: the list, live counts, a filter.
	var rows int
	run(t, ctx, "open runs",
		chromedp.Navigate(base+"/runs?ns=default"),
		chromedp.WaitVisible(`#runs-table`, chromedp.ByQuery),
		chromedp.WaitVisible(`#live.on`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("#runs-body tr[data-run-id]").length`, &rows))
	if rows != 6 {
		t.Fatalf("runs page shows %d runs, want 6", rows)
	}
	shoot(t, ctx, dir, "runs")
	var text string
	run(t, ctx, "filter by type",
		chromedp.SetValue(`#filters input[name=type]`, "Fail", chromedp.ByQuery),
		chromedp.Submit(`#filters`, chromedp.ByQuery),
		chromedp.WaitVisible(`#runs-body tr[data-run-id="`+failed.RunID.String()+`"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("#runs-body tr[data-run-id]").length`, &rows))
	if rows != 1 {
		t.Fatalf("filtered by type: %d rows", rows)
	}
	run(t, ctx, "filter by input",
		chromedp.Navigate(base+"/runs?ns=default"),
		chromedp.WaitVisible(`#filters`, chromedp.ByQuery),
		chromedp.SetValue(`#filters input[name=input]`, `$.customer == "cy"`, chromedp.ByQuery),
		chromedp.Submit(`#filters`, chromedp.ByQuery),
		chromedp.WaitVisible(`#runs-body tr[data-run-id="`+ids[2].String()+`"]`, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelectorAll("#runs-body tr[data-run-id]").length`, &rows))
	if rows != 1 {
		t.Fatalf("filtered by input: %d rows", rows)
	}

	// A live update without reload: a run started elsewhere appears, then
	// its completion changes the row and the counts.
	var marker bool
	run(t, ctx, "arm live page",
		chromedp.Navigate(base+"/runs?ns=default"),
		chromedp.WaitVisible(`#live.on`, chromedp.ByQuery),
		chromedp.Evaluate(`window.__noReload = true`, nil))
	live, err := e.cl.Start(bg, "Wait", map[string]string{"for": "live"}, client.StartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	row := `#runs-body tr[data-run-id="` + live.RunID.String() + `"]`
	run(t, ctx, "see the new run", chromedp.WaitVisible(row, chromedp.ByQuery))
	if _, err := e.cl.SendEvent(bg, live.RunID, "go", "now"); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "see it complete",
		chromedp.WaitVisible(row+` [data-field=status].s-completed`, chromedp.ByQuery),
		chromedp.Evaluate(`window.__noReload === true`, &marker),
		chromedp.Text(`[data-count=COMPLETED]`, &text, chromedp.ByQuery))
	if !marker {
		t.Fatal("the page reloaded for a live update")
	}
	if text != "5" {
		t.Fatalf("completed count %q, want 5", text)
	}

	// Run detail, cancel.
	run(t, ctx, "open a run",
		chromedp.Navigate(base+"/runs?ns=default"),
		chromedp.WaitVisible(`#runs-body tr[data-run-id="`+waiting.RunID.String()+`"] a`, chromedp.ByQuery),
		chromedp.Click(`#runs-body tr[data-run-id="`+waiting.RunID.String()+`"] a`, chromedp.ByQuery),
		chromedp.WaitVisible(`#run-detail`, chromedp.ByQuery))
	run(t, ctx, "open a finished run", chromedp.Navigate(base+"/runs/"+ids[0].String()+"?ns=default"), chromedp.WaitVisible(`.timeline .bar`, chromedp.ByQuery))
	shoot(t, ctx, dir, "run")
	run(t, ctx, "cancel",
		chromedp.Navigate(base+"/runs/"+waiting.RunID.String()+"?ns=default"),
		chromedp.WaitVisible(`#live.on`, chromedp.ByQuery),
		chromedp.Click(`#btn-cancel`, chromedp.ByQuery),
		chromedp.WaitVisible(`#run-status.s-cancelled`, chromedp.ByQuery))
	if r := e.wait(waiting.RunID); r.Status != "CANCELLED" {
		t.Fatalf("cancelled from the browser: %s", r.Status)
	}

	// Retry a failed run from its page.
	before, _ := e.cl.Get(bg, failed.RunID)
	run(t, ctx, "retry",
		chromedp.Navigate(base+"/runs/"+failed.RunID.String()+"?ns=default"),
		chromedp.WaitVisible(`#run-error`, chromedp.ByQuery),
		chromedp.Click(`#btn-retry`, chromedp.ByQuery),
		chromedp.WaitVisible(`#toast.show`, chromedp.ByQuery),
		chromedp.Text(`#toast`, &text, chromedp.ByQuery))
	if !strings.HasPrefix(text, "Done") {
		t.Fatalf("retry toast: %q", text)
	}
	e.wait(failed.RunID)
	after, _ := e.cl.Get(bg, failed.RunID)
	if after.FinishedAt == nil || !after.FinishedAt.After(*before.FinishedAt) {
		t.Fatalf("retry from the browser: finished at %v, was %v", after.FinishedAt, before.FinishedAt)
	}

	// The other views.
	for _, v := range []struct{ name, path, ready string }{
		{"deadletters", "/dead-letters", "table.dlq"},
		{"schedules", "/schedules", "table.schedules ol.fires li"},
		{"workers", "/workers", "table.workers tr[data-worker-id]"},
		{"queues", "/queues", "table.limits"},
		{"start", "/start", "#start-form"},
	} {
		run(t, ctx, "open "+v.name, chromedp.Navigate(base+v.path+"?ns=default"), chromedp.WaitVisible(v.ready, chromedp.ByQuery))
		shoot(t, ctx, dir, v.name)
	}
	// Dead letters: a dry run counts the group.
	run(t, ctx, "dry run",
		chromedp.Navigate(base+"/dead-letters?ns=default"),
		chromedp.WaitVisible(`table.dlq button[value=true]`, chromedp.ByQuery),
		chromedp.Click(`table.dlq button[value=true]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#dlq-result-0`, chromedp.ByQuery),
		chromedp.Text(`#dlq-result-0`, &text, chromedp.ByQuery))
	if !strings.Contains(text, `"matched": 1`) {
		t.Fatalf("dry run result: %q", text)
	}
	// Start a run from the UI.
	run(t, ctx, "start a run",
		chromedp.Navigate(base+"/start?ns=default"),
		chromedp.WaitVisible(`#start-form`, chromedp.ByQuery),
		chromedp.SetValue(`#start-form input[name=type]`, "Echo", chromedp.ByQuery),
		chromedp.SetValue(`#start-form textarea[name=input]`, `{"from":"browser"}`, chromedp.ByQuery),
		chromedp.Click(`#start-form button`, chromedp.ByQuery),
		chromedp.WaitVisible(`#run-detail`, chromedp.ByQuery),
		chromedp.Text(`#run-input`, &text, chromedp.ByQuery))
	if !strings.Contains(text, "browser") {
		t.Fatalf("started run's input: %q", text)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		t.Fatal("browser gone")
	}
}
