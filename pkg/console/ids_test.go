package console_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/kagzi/kagzi/pkg/client"
	"github.com/kagzi/kagzi/pkg/console"
)

// shownID is an id link (or span) as the pages show it: the full id in
// its title, the abbreviation as its text.
var shownID = regexp.MustCompile(`class="mono[^"]*"(?: data-field="link")?(?: href="[^"]*")? title="([0-9a-f-]{36})[^"]*">([^<]*)</`)

// copyButton is the button that copies the full id beside it.
var copyButton = regexp.MustCompile(`<button type="button" class="copy" data-copy="([0-9a-f-]{36})"`)

// TestRunIDsToldApart: runs started together (UUID v7 ids sharing their
// first digits, the creation time) are shown with abbreviations that
// differ, each carrying its full id to read and copy, on the runs list,
// a run's page and a schedule's last runs.
func TestRunIDsToldApart(t *testing.T) {
	e := start(t, console.Options{})
	ctx := context.Background()
	var ids []uuid.UUID
	for range 3 {
		h, err := e.cl.Start(ctx, "Echo", map[string]string{"at": "once"}, client.StartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, h.RunID)
	}
	if ids[0].String()[:8] != ids[2].String()[:8] {
		t.Logf("ids %v crossed a 65 s boundary of their time prefix; the displays must differ all the same", ids)
	}
	sc, err := e.cl.CreateSchedule(ctx, "Echo", map[string]string{}, client.ScheduleOptions{Cron: "0 0 1 1 *"})
	if err != nil {
		t.Fatal(err)
	}
	var fired []uuid.UUID
	for range 2 {
		h, err := e.cl.TriggerSchedule(ctx, sc.ID)
		if err != nil {
			t.Fatal(err)
		}
		fired = append(fired, h.RunID)
	}
	for _, id := range append(append([]uuid.UUID{}, ids...), fired...) {
		e.wait(id)
	}

	page := func(path string) string {
		t.Helper()
		code, body := e.do(http.MethodGet, path, nil)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, code)
		}
		return string(body)
	}
	// shown returns the abbreviation each of want is shown with on the
	// page, failing if one is missing, lacks its copy button, or shares its
	// abbreviation with another.
	shown := func(path string, want []uuid.UUID) map[uuid.UUID]string {
		t.Helper()
		body := page(path)
		got := map[uuid.UUID]string{}
		for _, m := range shownID.FindAllStringSubmatch(body, -1) {
			got[uuid.MustParse(m[1])] = m[2]
		}
		copies := map[string]bool{}
		for _, m := range copyButton.FindAllStringSubmatch(body, -1) {
			copies[m[1]] = true
		}
		by := map[string]uuid.UUID{}
		for _, id := range want {
			text, ok := got[id]
			if !ok {
				t.Fatalf("GET %s shows no link titled with the full id %s", path, id)
			}
			if end := strings.TrimPrefix(text, "…"); end == "" || end == id.String() || !strings.HasSuffix(id.String(), end) {
				t.Errorf("GET %s shows %s as %q: want an abbreviation of its end", path, id, text)
			}
			if other, dup := by[text]; dup {
				t.Errorf("GET %s shows %s and %s alike, as %q", path, other, id, text)
			}
			by[text] = id
			if path != "/schedules?ns=default" && !copies[id.String()] {
				t.Errorf("GET %s has no copy button for %s", path, id)
			}
		}
		return got
	}

	list := shown("/runs?ns=default&type=Echo", append(append([]uuid.UUID{}, ids...), fired...))
	t.Logf("runs list shows %v", list)
	shown("/schedules?ns=default", fired)

	// A run's own page shows its id whole, with its copy button.
	body := page("/runs/" + ids[1].String() + "?ns=default")
	if !strings.Contains(body, `<span class="mono" id="run-id">`+ids[1].String()+`</span>`) || !copyButton.MatchString(body) {
		t.Errorf("the run's page does not show its full id with a copy button")
	}
}
