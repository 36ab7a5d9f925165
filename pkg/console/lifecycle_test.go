package console_test

import (
	"bufio"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kagzi/kagzi/internal/lifecycle"
	"github.com/kagzi/kagzi/pkg/console"
	"github.com/kagzi/kagzi/tests/testdb"
)

// TestStartOnceStopTwice: a console starts once (its second Start fails as
// every component's does), its Stop ends the open event streams, and Stop
// is safe twice and before Start.
func TestStartOnceStopTwice(t *testing.T) {
	pool, _ := testdb.Pool(t)
	unstarted, err := console.New(console.Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	unstarted.Stop()
	unstarted.Stop()

	con, err := console.New(console.Options{Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	if err := con.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := con.Start(t.Context()); !errors.Is(err, lifecycle.ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	srv := httptest.NewServer(con.Handler())
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/api/v1/stream?ns=default", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 64)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				events <- name
			}
		}
	}()
	select {
	case name := <-events:
		if name != "counts" {
			t.Fatalf("first event %q, want counts", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no first event within 10 s")
	}

	con.Stop()
	deadline := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-events:
		case <-deadline:
			t.Fatal("the event stream outlived Stop")
		}
	}
	con.Stop()
}
