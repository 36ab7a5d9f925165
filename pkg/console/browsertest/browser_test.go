package browsertest_test

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

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
)

// The browser tests drive Debian's chromium (scripts/ensure-chromium.sh
// installs it in `make test`) headless through chromedp against the live
// engine, and save screenshots of every view, light and dark, in
// KAGZI_ARTIFACTS_DIR (default artifacts/console at the repository root,
// ignored by git; docs/console holds the ones docs/operations.md shows).

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
		dir = filepath.Join("..", "..", "..", "artifacts", "console")
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
		// What the page showed helps more than a deadline.
		var where, toast string
		dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer dcancel()
		_ = chromedp.Run(dctx, chromedp.Location(&where), chromedp.Evaluate(`(document.getElementById("toast")||{}).textContent || ""`, &toast))
		t.Fatalf("%s: %v (page %s, toast %q)", what, err, where, toast)
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
	checkShownIDs(t, ctx, base, live.RunID)
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
		{"triggers", "/triggers", "table.triggers"},
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
	browserActions(t, e, ctx)
}

// yes answers the pages' confirmation dialogs (hx-confirm) as an operator
// would; a navigation resets it.
var yes = chromedp.Evaluate(`window.confirm = () => true`, nil)

// until waits for a JavaScript condition on the page to hold.
func until(expr string) chromedp.Action { return chromedp.Poll(expr, nil) }

// click clicks a write button until the page has sent its request
// (console.js counts them in data-writes): a live refresh replacing the
// button at that moment swallows the click, and a write never sent is
// safe to click again.
func click(sel string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		const writes = `Number(document.documentElement.getAttribute("data-writes") || 0)`
		var before int
		if err := chromedp.Evaluate(writes, &before).Do(ctx); err != nil {
			return err
		}
		for {
			if err := chromedp.Click(sel, chromedp.ByQuery).Do(ctx); err != nil {
				return err
			}
			sent := fmt.Sprintf("%s > %d", writes, before)
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			err := chromedp.Poll(sent, nil).Do(pctx)
			cancel()
			if err == nil || ctx.Err() != nil {
				return err
			}
		}
	})
}

// settled waits for the page's live refreshes to land (console.js marks
// them with data-busy), so that a click hits the button it aims at.
var settled = until(`!document.documentElement.hasAttribute("data-busy") && !document.querySelector(".htmx-request")`)

// browserActions clicks every write the console offers in the browser,
// on the same engine and browser as TestBrowser, and checks each by what
// the page shows after its live update and by the engine's state. The
// worker is drained last: runs need it until then.
func browserActions(t *testing.T, e *env, ctx context.Context) {
	bg := context.Background()
	base := e.http.URL

	t.Run("terminate", func(t *testing.T) {
		h, err := e.cl.Start(bg, "Wait", map[string]string{"for": "terminate"}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var errText string
		run(t, ctx, "terminate",
			chromedp.Navigate(base+"/runs/"+h.RunID.String()+"?ns=default"),
			chromedp.WaitVisible(`#live.on`, chromedp.ByQuery), yes,
			chromedp.SetValue(`form input[name=reason]`, "stuck order", chromedp.ByQuery),
			chromedp.Click(`#btn-terminate`, chromedp.ByQuery),
			// Read in one script: the live refresh that shows the new
			// status may replace the nodes between a query and a read.
			until(`!!document.querySelector("#run-status.s-cancelled") && !!document.querySelector("#run-error")`),
			chromedp.Evaluate(`(document.querySelector("#run-error") || {textContent: ""}).textContent`, &errText))
		if !strings.Contains(errText, "stuck order") {
			t.Fatalf("terminated run's error on the page: %q", errText)
		}
		r, err := e.cl.Get(bg, h.RunID)
		if err != nil || r.Status != "CANCELLED" || !strings.Contains(r.Error, "stuck order") {
			t.Fatalf("terminated from the browser: %+v, %v", r, err)
		}
	})

	t.Run("send event", func(t *testing.T) {
		h, err := e.cl.Start(bg, "Wait", map[string]string{"for": "event"}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out string
		run(t, ctx, "send event",
			chromedp.Navigate(base+"/runs/"+h.RunID.String()+"?ns=default"),
			chromedp.WaitVisible(`#live.on`, chromedp.ByQuery),
			chromedp.SetValue(`#event-form input[name=name]`, "go", chromedp.ByQuery),
			chromedp.SetValue(`#event-form input[name=payload]`, `"from the browser"`, chromedp.ByQuery),
			chromedp.Click(`#event-form button`, chromedp.ByQuery),
			until(`!!document.querySelector("#run-status.s-completed") && !!document.querySelector("#run-output")`),
			chromedp.Evaluate(`(document.querySelector("#run-output") || {textContent: ""}).textContent`, &out))
		if !strings.Contains(out, "got from the browser") {
			t.Fatalf("output on the page after the event: %q", out)
		}
		if r := e.wait(h.RunID); r.Status != "COMPLETED" {
			t.Fatalf("run after the event: %s", r.Status)
		}
	})

	t.Run("schedule", func(t *testing.T) {
		const cron = "*/7 * * * *"
		var id string
		row := func() string { return `tr[data-schedule-id="` + id + `"]` }
		find := `[...document.querySelectorAll("table.schedules tr[data-schedule-id]")].filter(r => r.cells[2].textContent === "` + cron + `").map(r => r.dataset.scheduleId)[0] || ""`
		run(t, ctx, "create",
			chromedp.Navigate(base+"/schedules?ns=default"),
			chromedp.WaitVisible(`#live.on`, chromedp.ByQuery),
			chromedp.Click(`#new-schedule summary`, chromedp.ByQuery),
			chromedp.SetValue(`#schedule-form input[name=type]`, "Echo", chromedp.ByQuery),
			chromedp.SetValue(`#schedule-form input[name=cron]`, cron, chromedp.ByQuery),
			chromedp.SetValue(`#schedule-form input[name=timezone]`, "Asia/Tokyo", chromedp.ByQuery),
			chromedp.SetValue(`#schedule-form textarea[name=input]`, `{"from":"schedule"}`, chromedp.ByQuery),
			chromedp.Click(`#schedule-form button`, chromedp.ByQuery),
			until(find+` !== ""`),
			chromedp.Evaluate(find, &id))
		sid, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("created schedule's id on the page: %q", id)
		}
		sc, err := e.cl.GetSchedule(bg, sid)
		if err != nil || sc.Cron != cron || sc.Timezone != "Asia/Tokyo" || sc.Status != "SCHEDULED" {
			t.Fatalf("created from the browser: %+v, %v", sc, err)
		}
		run(t, ctx, "pause", yes, settled,
			click(row()+` .btn-pause`),
			chromedp.WaitVisible(row()+` .st.s-paused`, chromedp.ByQuery))
		if sc, _ := e.cl.GetSchedule(bg, sid); sc == nil || sc.Status != "PAUSED" {
			t.Fatalf("paused from the browser: %+v", sc)
		}
		run(t, ctx, "resume", settled,
			click(row()+` .btn-resume`),
			chromedp.WaitVisible(row()+` .st.s-scheduled`, chromedp.ByQuery))
		if sc, _ := e.cl.GetSchedule(bg, sid); sc == nil || sc.Status != "SCHEDULED" {
			t.Fatalf("resumed from the browser: %+v", sc)
		}
		var fired string
		run(t, ctx, "trigger", settled,
			click(row()+` .btn-trigger`),
			chromedp.WaitVisible(row()+` a.st`, chromedp.ByQuery),
			chromedp.AttributeValue(row()+` a.st`, "href", &fired, nil, chromedp.ByQuery))
		hist, err := e.cl.ScheduleHistory(bg, sid, 10)
		if err != nil || len(hist) != 1 || !strings.Contains(fired, hist[0].ID.String()) {
			t.Fatalf("triggered from the browser: page links %q, engine has %v (%v)", fired, hist, err)
		}
		run(t, ctx, "delete", yes, settled,
			click(row()+` .btn-delete`),
			until(`document.querySelector('`+row()+`') === null`))
		if sc, err := e.cl.GetSchedule(bg, sid); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("deleted from the browser, the engine still has %+v (%v)", sc, err)
		}
	})

	t.Run("limit", func(t *testing.T) {
		row := `table.limits tr[data-limit="default/Echo"]`
		var text string
		run(t, ctx, "set limit",
			chromedp.Navigate(base+"/queues?ns=default"),
			chromedp.WaitVisible(`#limit-form`, chromedp.ByQuery),
			chromedp.SetValue(`#limit-form input[name=type]`, "Echo", chromedp.ByQuery),
			chromedp.SetValue(`#limit-form input[name=max]`, "2", chromedp.ByQuery),
			chromedp.Click(`#limit-form button`, chromedp.ByQuery),
			chromedp.WaitVisible(row, chromedp.ByQuery),
			chromedp.Text(row+` td:nth-child(3)`, &text, chromedp.ByQuery))
		if text != "2" {
			t.Fatalf("limit on the page: %q", text)
		}
		limit := func() int {
			ls, err := e.cl.ConcurrencyLimits(bg)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range ls {
				if l.Queue == "default" && l.Type == "Echo" {
					return l.MaxRunning
				}
			}
			return -1
		}
		if n := limit(); n != 2 {
			t.Fatalf("limit set from the browser: engine has %d", n)
		}
		run(t, ctx, "remove limit", settled,
			click(row+` .btn-remove`),
			until(`document.querySelector('`+row+`') === null`))
		if n := limit(); n != -1 {
			t.Fatalf("limit removed from the browser: engine still has %d", n)
		}
	})

	// The Limits panel follows the runs without a reload: the claims of
	// a rate key's window move as runs with the key are claimed, and the
	// form outside the panel keeps what was typed into it.
	t.Run("limits panel", func(t *testing.T) {
		if _, err := e.cl.SetKeyConcurrencyLimit(bg, "default", "Echo", 1); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = e.cl.RemoveConcurrencyLimit(bg, "default", "Echo") }()
		// A window of a day, the longest: every claim below falls in one.
		if _, err := e.cl.SetRateLimit(bg, "crm", 100, client.MaxRatePeriod); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = e.cl.RemoveRateLimit(bg, "crm") }()
		claims := `table.rate-limits tr[data-rate-key="crm"] td.claims`
		var before, after, typed string
		run(t, ctx, "open queues",
			chromedp.Navigate(base+"/queues?ns=default"),
			chromedp.WaitVisible(`#live.on`, chromedp.ByQuery),
			chromedp.WaitVisible(`#limits-panel `+claims, chromedp.ByQuery),
			chromedp.Text(claims, &before, chromedp.ByQuery),
			chromedp.SetValue(`#limit-form input[name=type]`, "Typed", chromedp.ByQuery))
		if before != "0 / 100" {
			t.Fatalf("claims before any run: %q", before)
		}
		for i := range 2 {
			h, err := e.cl.Start(bg, "Echo", i, client.StartOptions{ConcurrencyKey: "tenant-1", RateLimitKey: "crm"})
			if err != nil {
				t.Fatal(err)
			}
			e.wait(h.RunID)
		}
		run(t, ctx, "claims shown live",
			until(`document.querySelector('`+claims+`').textContent === "2 / 100"`),
			chromedp.Text(claims, &after, chromedp.ByQuery),
			chromedp.Value(`#limit-form input[name=type]`, &typed, chromedp.ByQuery))
		if after != "2 / 100" || typed != "Typed" {
			t.Fatalf("after two claims: %q, the form's type %q", after, typed)
		}
		shoot(t, ctx, artifactsDir(t), "limits")
	})

	t.Run("namespace", func(t *testing.T) {
		nc, err := nats.Connect(e.nc.ConnectedUrl())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		other, err := client.NewFromStore(e.srv.Store, nc, client.Options{Namespace: "other"})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		h, err := other.Start(bg, "Echo", map[string]string{"in": "other"}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var rows int
		var ns string
		run(t, ctx, "switch namespace",
			chromedp.Navigate(base+"/runs?ns=default"),
			chromedp.WaitReady(`#ns-switch option[value=other]`, chromedp.ByQuery),
			chromedp.SetValue(`#ns-switch`, "other", chromedp.ByQuery),
			chromedp.WaitVisible(`#runs-body tr[data-run-id="`+h.RunID.String()+`"]`, chromedp.ByQuery),
			chromedp.AttributeValue(`meta[name=kagzi-ns]`, "content", &ns, nil, chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelectorAll("#runs-body tr[data-run-id]").length`, &rows))
		if ns != "other" || rows != 1 {
			t.Fatalf("after switching: namespace %q, %d runs, want other with 1", ns, rows)
		}
	})

	t.Run("drain", func(t *testing.T) {
		ws, err := e.cl.Workers(bg)
		if err != nil || len(ws) != 1 {
			t.Fatalf("workers: %v, %v", ws, err)
		}
		row := `table.workers tr[data-worker-id="` + ws[0].ID.String() + `"]`
		run(t, ctx, "drain",
			chromedp.Navigate(base+"/workers?ns=default"),
			chromedp.WaitVisible(row+` .btn-drain`, chromedp.ByQuery), yes,
			click(row+` .btn-drain`),
			// Idle, the drained worker may have finished already.
			until(`document.querySelector('`+row+` .st.s-draining, `+row+` .st.s-offline') !== null`))
		ws, err = e.cl.Workers(bg)
		if err != nil || len(ws) != 1 || (ws[0].Status != "DRAINING" && ws[0].Status != "OFFLINE") {
			t.Fatalf("drained from the browser: %+v, %v", ws, err)
		}
	})
}

// checkShownIDs: on the runs page, every run (those started together,
// and live, which console.js added) is shown by the
// end of its id, which differs between them where the start (a UUID v7's
// creation time) does not, with the full id in the link's title and on
// its copy button; the button copies the whole id of live.
func checkShownIDs(t *testing.T, ctx context.Context, base string, live uuid.UUID) {
	t.Helper()
	var rows [][]string
	run(t, ctx, "read the shown ids", chromedp.Evaluate(`[...document.querySelectorAll("#runs-body tr[data-run-id]")].map(r => {
		const a = r.querySelector("[data-field=link]"), b = r.querySelector("button.copy");
		return [r.dataset.runId, a.textContent, a.title, b ? (b.dataset.copy || "") : ""];
	})`, &rows))
	seen := map[string]string{}
	for _, r := range rows {
		id, text, title, cp := r[0], r[1], r[2], r[3]
		if text != "…"+id[len(id)-8:] || title != id || cp != id {
			t.Errorf("run %s shown as %q, title %q, copy button %q", id, text, title, cp)
		}
		if other, dup := seen[text]; dup {
			t.Errorf("runs %s and %s both shown as %q", other, id, text)
		}
		seen[text] = id
	}
	if _, ok := seen["…"+live.String()[28:]]; !ok || len(rows) < 2 {
		t.Fatalf("shown ids %v: want the live run's among several", seen)
	}
	var toast, copied string
	row := `#runs-body tr[data-run-id="` + live.String() + `"]`
	run(t, ctx, "copy the live run's id",
		cdpbrowser.GrantPermissions([]cdpbrowser.PermissionType{cdpbrowser.PermissionTypeClipboardReadWrite, cdpbrowser.PermissionTypeClipboardSanitizedWrite}).WithOrigin(base),
		chromedp.Click(row+` button.copy`, chromedp.ByQuery),
		until(`document.getElementById("toast").textContent.indexOf("Copied") === 0`),
		chromedp.Text(`#toast`, &toast, chromedp.ByQuery),
		chromedp.Evaluate(`navigator.clipboard.readText()`, &copied, func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if toast != "Copied "+live.String() || copied != live.String() {
		t.Fatalf("copy button: toast %q, clipboard %q, want %s", toast, copied, live)
	}
}
